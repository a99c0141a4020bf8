"""Django tasks: plain functions with @task, enqueued through Django's own API."""

import os
from pathlib import Path

try:
    from django.tasks import task  # Django 6+
except ImportError:
    from django_tasks import task  # the backport


@task(queue_name="emails", priority=10)
def send_receipt(order_id: int, email: str) -> dict[str, object]:
    # Stands in for sending mail: leaves a trace the example (and its test) can check.
    out = Path(os.environ.get("SHOP_OUTBOX", "outbox.txt"))
    with out.open("a") as f:
        f.write(f"receipt for order {order_id} to {email}\n")
    return {"order": order_id, "sent_to": email}  # the result's return_value


@task()
def always_fails() -> None:
    raise RuntimeError("payment provider down")
