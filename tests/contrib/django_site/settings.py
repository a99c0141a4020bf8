"""Settings for tests/contrib: a sqlite database and the pyqueue backend, as a project has them."""

import importlib.util
import os
from urllib.parse import urlsplit

SECRET_KEY = "tests-only"
USE_TZ = True
INSTALLED_APPS = ["pyqueue.contrib.django.outbox"]
if not importlib.util.find_spec("django.tasks"):
    INSTALLED_APPS.append("django_tasks")
if os.environ.get("SITE_PG"):  # a PostgreSQL URL (tests/pg.py)
    _pg = urlsplit(os.environ["SITE_PG"])
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": _pg.path.lstrip("/"),
            "USER": _pg.username,
            "HOST": _pg.hostname,
            "PORT": str(_pg.port),
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ["SITE_DB"],
            "CONN_MAX_AGE": 0,  # Django's default: a connection lives for one request (here: one job)
        }
    }
_ADDRESS = os.environ.get("PYQUEUE_ADDRESS", "127.0.0.1:7411")
TASKS = {
    "default": {
        "BACKEND": "pyqueue.contrib.django.PyQueueBackend",
        "QUEUES": ["default"],
        "OPTIONS": {"ADDRESS": _ADDRESS},
    },
    # Every enqueue a row in the request's transaction, moved by the relay (docs/outbox.md).
    "outbox": {
        "BACKEND": "pyqueue.contrib.django.PyQueueBackend",
        "QUEUES": ["default"],
        "OPTIONS": {"ADDRESS": _ADDRESS, "OUTBOX": True},
    },
}
