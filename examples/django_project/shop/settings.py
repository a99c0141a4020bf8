"""A minimal Django project whose tasks run on pyqueue."""

import importlib.util
import os

SECRET_KEY = "example-only"
USE_TZ = True
# Django 6 has django.tasks built in; older Django uses the django-tasks backport app.
INSTALLED_APPS = [] if importlib.util.find_spec("django.tasks") else ["django_tasks"]
TASKS = {
    "default": {
        "BACKEND": "pyqueue.contrib.django.PyQueueBackend",
        "QUEUES": ["default", "emails"],
        "OPTIONS": {"ADDRESS": os.environ.get("PYQUEUE_ADDRESS", "127.0.0.1:7411"), "KEEP_COMPLETED": 3600},
    }
}
