from django.apps import AppConfig


class OutboxConfig(AppConfig):  # type: ignore[misc]
    name = "pyqueue.contrib.django.outbox"
    label = "pyqueue_outbox"
    verbose_name = "pyqueue outbox"
    default_auto_field = "django.db.models.BigAutoField"
