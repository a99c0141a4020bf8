"""Workflow commands: `pyqueue batches` (the newest batches and their progress) and `pyqueue
batch ID` (one batch; --cancel or --retry its workflow)."""

import json
from datetime import datetime

import click
from rich.console import Console

from pyqueue.cli.fit import FitColumn, fit_table
from pyqueue.cli.jobs import client_for, fail
from pyqueue.client.workflows import BatchInfo
from pyqueue.errors import PyQueueError

COLUMNS = [
    FitColumn("batch", 0),
    FitColumn("name", 1, wrap=True),
    FitColumn("total", 3),
    FitColumn("pending", 0),
    FitColumn("completed", 0),
    FitColumn("dead", 0),
    FitColumn("cancelled", 4),
    FitColumn("deleted", 5),
    FitColumn("fired", 2),
    FitColumn("created", 6),
]


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S") if moment else "-"


def _row(b: BatchInfo) -> list[str]:
    fired = ",".join(b.fired) or "-"
    if b.workflow_cancelled:
        fired += " (cancelled)"
    counts = [b.total, b.pending, b.completed, b.dead, b.cancelled, b.deleted]
    return [str(b.id), b.name or "-", *map(str, counts), fired, _when(b.created_at)]


@click.command()
@click.option("--limit", type=int, default=50, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def batches(ctx: click.Context, limit: int, as_json: bool) -> None:
    """The newest batches, with their jobs by state and the callbacks that fired."""
    try:
        with client_for(ctx) as client:
            found = client.batches(limit)
    except PyQueueError as exc:
        fail(exc)
    if as_json:
        click.echo(json.dumps([b.to_dict() for b in found], indent=2))
        return
    if not found:
        click.echo("no batches (finished ones are kept as long as their jobs: --keep-completed, --keep-dead)")
        return
    Console().print(fit_table(COLUMNS, [_row(b) for b in found]))


@click.command()
@click.argument("batch_id", type=int)
@click.option("--cancel", is_flag=True, help="Cancel what has not run of the batch's workflow.")
@click.option(
    "--retry", is_flag=True, help="Retry the workflow's dead jobs; callbacks not fired yet fire once."
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def batch(ctx: click.Context, batch_id: int, cancel: bool, retry: bool, as_json: bool) -> None:
    """One batch: its progress, callbacks and dead jobs."""
    try:
        with client_for(ctx) as client:
            info = client.batch(batch_id)
            if cancel or retry:
                change = client.cancel_workflow if cancel else client.retry_workflow
                result = change(info.workflow_id)
                verb = "cancelled" if cancel else "retried"
                click.echo(f"{verb} {len(result.changed)} jobs of workflow {info.workflow_id}")
                info = client.batch(batch_id)
    except PyQueueError as exc:
        fail(exc)
    if as_json:
        click.echo(json.dumps(info.to_dict(), indent=2))
        return
    Console().print(fit_table(COLUMNS, [_row(info)]))
    click.echo(
        f"workflow {info.workflow_id}; finished {_when(info.finished_at)}; kept until {_when(info.expires_at)}"
    )
    if info.problem:
        click.echo(f"problem: {info.problem}")
    if info.dead_jobs:
        click.echo(
            "dead jobs: " + " ".join(map(str, info.dead_jobs)) + f" (pyqueue batch {batch_id} --retry)"
        )
