"""Client commands: `pyqueue enqueue`, `pyqueue job`."""

import dataclasses
import json
from typing import Any, NoReturn

import click

from pyqueue import defaults
from pyqueue.client import Client
from pyqueue.errors import PyQueueError


def client_for(ctx: click.Context) -> Client:
    return Client(ctx.obj["address"])


def fail(exc: PyQueueError) -> NoReturn:
    raise click.ClickException(f"{exc.code.name}: {exc}") from None


@click.command()
@click.argument("type_", metavar="TYPE")
@click.option("--queue", default="default", show_default=True)
@click.option("--payload", default=None, help="The payload, as JSON.")
@click.option(
    "--priority", type=int, default=defaults.PRIORITY, show_default=True, help="0 runs first, 65535 last."
)
@click.option("--delay", type=float, default=None, help="Run after this many seconds.")
@click.option(
    "--max-retries", type=int, default=None, help="Retries before the job is dead (default: the server's)."
)
@click.option("--timeout", type=float, default=None, help="Seconds an attempt may run before it is failed.")
@click.pass_context
def enqueue(
    ctx: click.Context,
    type_: str,
    queue: str,
    payload: str | None,
    priority: int,
    delay: float | None,
    max_retries: int | None,
    timeout: float | None,
) -> None:
    """Enqueue one job and print its id."""
    try:
        value: Any = None if payload is None else json.loads(payload)
    except json.JSONDecodeError as exc:
        raise click.BadParameter(f"not valid JSON: {exc}", param_hint="--payload") from None
    try:
        with client_for(ctx) as client:
            job_ = client.enqueue(
                type_,
                value,
                queue=queue,
                priority=priority,
                delay=delay,
                max_retries=max_retries,
                timeout=timeout,
            )
            click.echo(job_.id)
    except PyQueueError as exc:
        fail(exc)


@click.command()
@click.argument("job_id", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print the job as JSON.")
@click.pass_context
def job(ctx: click.Context, job_id: int, as_json: bool) -> None:
    """Show one job."""
    try:
        with client_for(ctx) as client:
            found = client.get_job(job_id)
    except PyQueueError as exc:
        fail(exc)
    data = found.to_dict()
    if as_json:
        click.echo(json.dumps(data, indent=2))
        return
    width = max(len(k) for k in data)
    for key, value in data.items():
        click.echo(f"{key:<{width}}  {value if value is not None else '-'}")


@click.command()
@click.argument("job_id", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print the history as JSON.")
@click.pass_context
def errors(ctx: click.Context, job_id: int, as_json: bool) -> None:
    """Show a job's error history, one failed attempt per entry."""
    try:
        with client_for(ctx) as client:
            history = client.job_errors(job_id)
    except PyQueueError as exc:
        fail(exc)
    if as_json:
        click.echo(json.dumps([{**dataclasses.asdict(e), "at": e.at.isoformat()} for e in history], indent=2))
        return
    if not history:
        click.echo("no errors")
    for e in history:
        label = f"{e.error_type}: " if e.error_type else ""
        click.echo(f"attempt {e.attempt}  {e.at:%Y-%m-%d %H:%M:%S}  {e.kind}  {label}{e.message}")
        if e.backtrace:
            click.echo("    " + e.backtrace.rstrip().replace("\n", "\n    "))
