"""Client commands: `pyqueue enqueue`, `pyqueue job`."""

import json
from typing import Any

import click

from pyqueue.client import Client
from pyqueue.errors import PyQueueError


def _client(ctx: click.Context) -> Client:
    return Client(ctx.obj["address"])


@click.command()
@click.argument("type_", metavar="TYPE")
@click.option("--queue", default="default", show_default=True)
@click.option("--payload", default=None, help="The payload, as JSON.")
@click.option("--priority", type=int, default=32768, show_default=True, help="0 runs first, 65535 last.")
@click.pass_context
def enqueue(ctx: click.Context, type_: str, queue: str, payload: str | None, priority: int) -> None:
    """Enqueue one job and print its id."""
    try:
        value: Any = None if payload is None else json.loads(payload)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}", param_hint="--payload") from None
    try:
        with _client(ctx) as client:
            click.echo(client.enqueue(type_, value, queue=queue, priority=priority).id)
    except PyQueueError as exc:
        raise click.ClickException(f"{exc.code.name}: {exc}") from None


@click.command()
@click.argument("job_id", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print the job as JSON.")
@click.pass_context
def job(ctx: click.Context, job_id: int, as_json: bool) -> None:
    """Show one job."""
    try:
        with _client(ctx) as client:
            found = client.get_job(job_id)
    except PyQueueError as exc:
        raise click.ClickException(f"{exc.code.name}: {exc}") from None
    data = found.to_dict()
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    width = max(len(k) for k in data)
    for key, value in data.items():
        click.echo(f"{key:<{width}}  {value if value is not None else '-'}")
