"""Celery on pyqueue: the broker and the result backend are `pyqueue://HOST:PORT` (docs/celery.md).

Importing this package registers the kombu transport's name; the `celery` command does so by its
plugin entry point, and the result backend by Celery's own `celery.result_backends` entry point.
"""

from kombu.transport import TRANSPORT_ALIASES

TRANSPORT_ALIASES.setdefault("pyqueue", "pyqueue.contrib.celery.transport:Transport")
