"""A Django app's side of the outbox test: `python shop.py migrate`, `order N commit|rollback`
(saves an order and enqueues its receipt through the outbox backend, in one transaction; prints
the result id), `spec N` (a job spec through `outbox.enqueue_spec`), `result ID` (prints the task result's status and return value as JSON), `result-relayed ID URL
before|after` (the same, with the relay on database URL moving the rows just before or just
after the backend asks the server for the job: the interleavings of a relay running beside it)."""

import json
import sys
from typing import Any

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
        _print_result(args[0])
    elif command == "result-relayed":
        _relay_beside_the_lookup(args[1], args[2])
        _print_result(args[0])


def _print_result(result_id: str) -> None:
    result = receipt.get_backend().get_result(result_id)
    value = result.return_value if result.status.name == "SUCCESSFUL" else None
    print(json.dumps({"status": result.status.name, "return_value": value, "args": result.args}))


def _relay_beside_the_lookup(database: str, when: str) -> None:
    """One relay step, once, just before or just after the backend asks the server for the job."""
    import os

    import pyqueue
    from pyqueue.contrib.relay import OutboxRelay, RelayConfig

    relay = OutboxRelay(RelayConfig(database=database), pyqueue.Client(os.environ["PYQUEUE_ADDRESS"]))
    backend = receipt.get_backend()
    lookup = backend.client.job_by_key
    moved: list[int] = []

    def job_by_key(queue: str, unique_key: str) -> Any:
        if when == "before" and not moved:
            moved.append(relay.run_once())
        try:
            return lookup(queue, unique_key)
        finally:
            if when == "after" and not moved:
                moved.append(relay.run_once())
            assert moved == [1], f"the relay moved {moved} rows, not the one"

    backend.client.job_by_key = job_by_key


if __name__ == "__main__":
    main(*sys.argv[1:])
