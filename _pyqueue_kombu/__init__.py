"""Names the `pyqueue://` kombu transport in every process that loads kombu, so that a Celery app
needs only its broker URL (docs/celery.md), even in a process that never imports pyqueue (a web
app that only calls `delay()`).

kombu finds a transport by a table of names and reads no entry point for them; it does load
the `kombu.serializers` entry points when it starts (kombu/serialization.py), and this package is
one. It lives outside `pyqueue` so that loading it imports nothing but kombu's table of names:
no grpc, no native extension, nothing that could fail kombu's own import. What kombu registers
from it is a plain JSON serializer named "pyqueue", under a content type of its own, so that it
changes no other serializer.
"""

import json
from typing import Any

from kombu.transport import TRANSPORT_ALIASES

TRANSPORT_ALIASES.setdefault("pyqueue", "pyqueue.contrib.celery.transport:Transport")


def _dumps(value: Any) -> str:
    return json.dumps(value)


SERIALIZER = (_dumps, json.loads, "application/x-pyqueue-json", "utf-8")
