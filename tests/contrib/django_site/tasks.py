"""Tasks that report what they find of the database connection on their thread."""

import os
import threading
from pathlib import Path

from django.db import connection

try:
    from django.tasks import task  # Django 6+
except ImportError:
    from django_tasks import task  # the backport


@task()
def use_database(n: int) -> None:
    # A connection left open by an earlier job on this thread would show here as already open.
    found = "open" if connection.connection is not None else "closed"
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    with Path(os.environ["SITE_TRACE"]).open("a") as f:
        f.write(f"{n} {found} {threading.get_ident()}\n")


@task(backend="outbox")
def receipt(order_id: int) -> str:
    with Path(os.environ["SITE_TRACE"]).open("a") as f:
        f.write(f"receipt {order_id}\n")
    return f"sent {order_id}"
