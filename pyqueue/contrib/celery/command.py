"""`celery -A proj pyqueue`: the queues of the app's pyqueue broker, with their jobs by status.

It is the `celery` command's plugin (entry point `celery.commands`), which is also what makes
`pyqueue://` known to kombu in every `celery worker` and `celery beat` without an import.
"""

from typing import Any

import click

import pyqueue.contrib.celery  # noqa: F401  (registers the transport's name)

STATUSES = ("scheduled", "ready", "in_flight", "completed", "dead", "cancelled")


@click.command(name="pyqueue")
@click.pass_context
def pyqueue_queues(ctx: click.Context) -> None:
    """The queues of this app's pyqueue broker, with their jobs by status."""
    app: Any = ctx.obj.app
    with app.connection_for_read() as connection:
        if connection.transport.driver_type != "pyqueue":
            raise click.ClickException(f"this app's broker is {connection.as_uri()}, not a pyqueue:// one")
        client = connection.transport.server().grpc()
        click.echo(" ".join(f"{h:>10}" for h in ("queue", *STATUSES)))
        for queue in client.queues():
            counts = [queue.counts.get(status, 0) for status in STATUSES]
            click.echo(" ".join(f"{v:>10}" for v in (queue.name, *counts)))
