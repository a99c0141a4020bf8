"""`pyqueue cron`: the periodic jobs the server keeps, with their next run; pause, resume, delete."""

import json

import click
from rich.console import Console
from rich.table import Table

from pyqueue.cli.jobs import client_for, fail
from pyqueue.errors import PyQueueError


@click.group(invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def cron(ctx: click.Context, as_json: bool) -> None:
    """List the periodic jobs (the default), or pause, resume or delete one."""
    if ctx.invoked_subcommand is not None:
        return
    try:
        with client_for(ctx) as client:
            entries = client.cron_entries()
    except PyQueueError as exc:
        fail(exc)
    if as_json:
        click.echo(json.dumps([e.to_dict() for e in entries], indent=2))
        return
    table = Table("name", "schedule", "job", "state", "next run", "last run")
    for e in entries:
        table.add_row(
            e.name,
            f"{e.schedule} ({e.timezone})",
            f"{e.type} on {e.queue}",
            f"skipped: {e.problem}" if e.problem else "paused" if e.paused else "running",
            e.next_run.astimezone().strftime("%Y-%m-%d %H:%M:%S") if e.next_run else "-",
            e.last_run.astimezone().strftime("%Y-%m-%d %H:%M:%S") if e.last_run else "-",
        )
    Console().print(table)
    if not entries:
        click.echo("no periodic jobs (declare them with @app.periodic; `pyqueue worker` sends them)")


def _change(ctx: click.Context, name: str, action: str) -> None:
    try:
        with client_for(ctx) as client:
            getattr(client, f"{action}_cron")(name)
    except PyQueueError as exc:
        fail(exc)
    click.echo(f"{name}: {action}d")


@cron.command()
@click.argument("name")
@click.pass_context
def pause(ctx: click.Context, name: str) -> None:
    """Stop enqueueing NAME's ticks (kept across restarts)."""
    _change(ctx, name, "pause")


@cron.command()
@click.argument("name")
@click.pass_context
def resume(ctx: click.Context, name: str) -> None:
    """Enqueue NAME's ticks again, from the next one (missed ticks are not caught up)."""
    _change(ctx, name, "resume")


@cron.command()
@click.argument("name")
@click.pass_context
def delete(ctx: click.Context, name: str) -> None:
    """Forget NAME (a worker that declares it again brings it back)."""
    _change(ctx, name, "delete")
