"""Celery on pyqueue: the broker and the result backend are `pyqueue://HOST:PORT` (docs/celery.md).

kombu learns the transport's name from `_pyqueue_kombu`, which it loads by its serializers'
entry point at start; importing this package names it too (a checkout run without installing).
The result backend is found by Celery's own `celery.result_backends` entry point.
"""

import _pyqueue_kombu  # noqa: F401
