"""A Django app's side of the outbox test: `python shop.py migrate`, `order N commit|rollback`
(saves an order and enqueues its receipt through the outbox backend, in one transaction; prints
the result id), `spec N` (a job spec through `outbox.enqueue_spec`), `result ID` (prints the task result's status and return value as JSON)."""

import json
import sys

import django

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402

from django_site.tasks import receipt  # noqa: E402


def main(command: str, *args: str) -> None:
    if command == "migrate":
        call_command("migrate", verbosity=0)
        with connection.cursor() as cursor:
            cursor.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY)")
    elif command == "order":
        n, outcome = int(args[0]), args[1]
        try:
            with transaction.atomic():
                with connection.cursor() as cursor:
                    cursor.execute("INSERT INTO orders (id) VALUES (%s)", [n])
                result = receipt.enqueue(n)
                print(result.id)
                if outcome == "rollback":
                    raise RuntimeError("the request failed after the enqueue")
        except RuntimeError:
            pass
    elif command == "spec":  # pyqueue's own outbox API, for jobs that are not Django tasks
        from pyqueue.contrib.django.outbox import outbox

        with transaction.atomic():
            print(
                outbox.enqueue_spec({"type": "billing.sync", "payload": int(args[0]), "queue": "billing"}).pk
            )
    elif command == "result":
        result = receipt.get_backend().get_result(args[0])
        value = result.return_value if result.status.name == "SUCCESSFUL" else None
        print(json.dumps({"status": result.status.name, "return_value": value, "args": result.args}))


if __name__ == "__main__":
    main(*sys.argv[1:])
