"""Django's Tasks API from wherever it lives: `django.tasks` (Django 6+), or the `django-tasks`
backport on older Django."""

try:  # Django 6+
    from django.tasks import TaskResult, TaskResultStatus
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import Task, TaskError
    from django.tasks.exceptions import InvalidTask as InvalidTaskError
    from django.tasks.exceptions import TaskResultDoesNotExist
except ImportError:  # the backport
    from django_tasks import TaskResult, TaskResultStatus
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.base import Task, TaskError
    from django_tasks.exceptions import InvalidTaskError, TaskResultDoesNotExist

__all__ = [
    "BaseTaskBackend",
    "InvalidTaskError",
    "Task",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultStatus",
]
