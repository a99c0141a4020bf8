"""pyqueue for Django: a Django Tasks backend, its worker app, and a transactional outbox.

    TASKS = {"default": {
        "BACKEND": "pyqueue.contrib.django.PyQueueBackend",
        "QUEUES": ["default", "mail"],
        "OPTIONS": {"ADDRESS": "127.0.0.1:7411", "KEEP_COMPLETED": 86400},
    }}

Run the tasks with `DJANGO_SETTINGS_MODULE=... pyqueue worker pyqueue.contrib.django:app`.

With `"OUTBOX": True` in OPTIONS (and "pyqueue.contrib.django.outbox" in INSTALLED_APPS), every
`task.enqueue()` writes a row on the database connection instead (`"OUTBOX": "alias"` for another
database than "default"): inside `transaction.atomic()` it commits or rolls back with the
request's own writes, and `pyqueue relay` moves committed rows to the server (docs/outbox.md).

- backend.py: the TASKS backend (enqueue, results);
- worker.py: `app`, which runs any Django task by its import path;
- outbox/: the outbox's Django app (model, migration) and `outbox.enqueue` for @app.job functions.
"""

from pyqueue.contrib.django.backend import PyQueueBackend, to_pyqueue_priority
from pyqueue.contrib.django.worker import DjangoApp, app

__all__ = ["DjangoApp", "PyQueueBackend", "app", "to_pyqueue_priority"]
