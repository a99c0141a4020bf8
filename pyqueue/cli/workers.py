"""`pyqueue workers`: the worker processes connected now, one row each (a worker holds a stream
to every shard that owns one of its queues)."""

import json
from datetime import UTC, datetime

import click
from rich.console import Console
from rich.table import Table

from pyqueue.cli.jobs import client_for, fail
from pyqueue.client.steering import per_process
from pyqueue.errors import PyQueueError


@click.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def workers(ctx: click.Context, as_json: bool) -> None:
    """Every connected worker: host, pid, queues, prefetch, jobs in flight, since when, last ack."""
    try:
        with client_for(ctx) as client:
            found = per_process(client.workers())
    except PyQueueError as exc:
        fail(exc)
    if as_json:
        click.echo(json.dumps([w.to_dict() for w in found], indent=2))
        return
    now = datetime.now(UTC)
    table = Table("worker", "queues", "in flight", "acked / failed", "connected", "last ack")
    for w in found:
        table.add_row(
            f"{w.host} pid {w.pid}" + (f"\n{w.name}" if w.name else ""),
            ", ".join(w.queues),
            f"{w.in_flight} of {w.prefetch}, {w.running} running",
            f"{w.acked} / {w.failed}",
            _ago(now, w.connected_at),
            _ago(now, w.last_ack_at) if w.last_ack_at else "-",
        )
    Console().print(table)
    if not found:
        click.echo("no worker is connected")


def _ago(now: datetime, then: datetime) -> str:
    seconds = max(0, int((now - then).total_seconds()))
    if seconds < 120:
        return f"{seconds}s ago"
    if seconds < 7200:
        return f"{seconds // 60}m ago"
    return f"{seconds // 3600}h ago"
