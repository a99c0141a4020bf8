"""Settings for tests/contrib: a sqlite database and the pyqueue backend, as a project has them."""

import importlib.util
import os

SECRET_KEY = "tests-only"
USE_TZ = True
INSTALLED_APPS = [] if importlib.util.find_spec("django.tasks") else ["django_tasks"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ["SITE_DB"],
        "CONN_MAX_AGE": 0,  # Django's default: a connection lives for one request (here: one job)
    }
}
TASKS = {
    "default": {
        "BACKEND": "pyqueue.contrib.django.PyQueueBackend",
        "QUEUES": ["default"],
        "OPTIONS": {"ADDRESS": os.environ.get("PYQUEUE_ADDRESS", "127.0.0.1:7411")},
    }
}
