"""`pyqueue jobs | queues | update | delete | pause | resume`: see and steer the queue."""

import json
from datetime import datetime
from typing import Any

import click
from rich.console import Console
from rich.progress import Progress

from pyqueue.cli.fair import show_keys
from pyqueue.cli.fit import FitColumn, fit_table
from pyqueue.cli.jobs import client_for, fail
from pyqueue.client import UNSET
from pyqueue.client.steering import STATUSES
from pyqueue.errors import PyQueueError

STATUS_CHOICE = click.Choice(list(STATUSES))  # every status the server knows, cancelled included
CHUNK = 1000
# In a narrow terminal the columns go from the last of these; id, type and status stay, whole.
JOB_COLUMNS = [
    FitColumn("id", 0),
    FitColumn("queue", 1, wrap=True),
    FitColumn("type", 0, wrap=True),
    FitColumn("status", 0),
    FitColumn("attempts", 2),
    FitColumn("run at", 3),
    FitColumn("priority", 4),
    FitColumn("created", 5),
]
_COUNT_KEEP = {"ready": 1, "in_flight": 2, "scheduled": 3, "dead": 4, "cancelled": 5, "completed": 6}


def filter_options(f: Any) -> Any:
    for option in reversed(
        [
            click.option("--queue", "queues", multiple=True, help="Only these queues (repeatable)."),
            click.option("--type", "types", multiple=True, help="Only these job types (repeatable)."),
            click.option(
                "--status", "statuses", multiple=True, type=STATUS_CHOICE, help="Only these statuses."
            ),
        ]
    ):
        f = option(f)
    return f


def _filters(queues: tuple[str, ...], types: tuple[str, ...], statuses: tuple[str, ...]) -> dict[str, Any]:
    return {"queues": list(queues), "types": list(types), "statuses": list(statuses)}


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else "-"


@click.command()
@filter_options
@click.option("--limit", type=int, default=50, show_default=True)
@click.option("--desc", is_flag=True, help="Newest first.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def jobs(
    ctx: click.Context,
    queues: tuple[str, ...],
    types: tuple[str, ...],
    statuses: tuple[str, ...],
    limit: int,
    desc: bool,
    as_json: bool,
) -> None:
    """List jobs, oldest first."""
    try:
        with client_for(ctx) as client:
            found = []
            for job in client.list_jobs(
                page_size=min(limit, 1000), descending=desc, **_filters(queues, types, statuses)
            ):
                found.append(job)
                if len(found) >= limit:
                    break
    except PyQueueError as exc:
        fail(exc)
    if as_json:
        click.echo(json.dumps([j.to_dict() for j in found], indent=2))
        return
    rows = [
        [
            str(j.id),
            j.queue,
            j.type,
            j.status,
            str(j.attempts),
            _when(j.run_at),
            str(j.priority),
            _when(j.created_at),
        ]
        for j in found
    ]
    Console().print(fit_table(JOB_COLUMNS, rows))


@click.command()
@click.option("--json", "as_json", is_flag=True)
@click.option("--keys", "keys_of", metavar="QUEUE", help="Show QUEUE's fair keys with the most jobs waiting.")
@click.option(
    "--weight",
    "weights",
    multiple=True,
    metavar="KEY=N",
    help="With --keys: set KEY's share of the queue's turns to N (1 to 10000; 1 clears; KEY empty: "
    "the jobs without a key). Repeatable.",
)
@click.option(
    "--limit", type=click.IntRange(1, 1000), default=20, help="With --keys: at most this many keys."
)
@click.pass_context
def queues(
    ctx: click.Context, as_json: bool, keys_of: str | None, weights: tuple[str, ...], limit: int
) -> None:
    """Every queue with its job count per status; with --keys, one queue's fair keys."""
    if keys_of is not None:
        show_keys(ctx, keys_of, weights, limit, as_json)
        return
    if weights:
        raise click.UsageError("--weight needs --keys QUEUE")
    try:
        with client_for(ctx) as client:
            found = client.queues()
    except PyQueueError as exc:
        fail(exc)
    if as_json:
        click.echo(
            json.dumps(
                [
                    {"name": q.name, "paused": q.paused, "counts": q.counts}
                    | (
                        {
                            "limits": {
                                "max_running": q.max_running,
                                "rate_per_s": q.rate_per_s,
                                "burst": q.burst,
                                "key_max_running": q.key_max_running,
                            }
                        }
                        if q.limits
                        else {}
                    )
                    for q in found
                ],
                indent=2,
            )
        )
        return
    columns = [FitColumn("queue", 0, wrap=True), FitColumn("state", 0, wrap=True)]
    columns += [FitColumn(status, _COUNT_KEEP.get(status, 9)) for status in STATUSES]
    rows = []
    for q in found:
        state = ("paused" if q.paused else "running") + (f"\n{q.limits}" if q.limits else "")
        rows.append([q.name, state, *(str(q.counts.get(c, 0)) for c in STATUSES)])
    Console().print(fit_table(columns, rows))


def _bulk(
    ctx: click.Context, verb: str, ids: tuple[int, ...], filters: dict[str, Any], yes: bool, apply: Any
) -> None:
    """Run a change over the selected jobs in chunks, with a progress bar and a confirmation."""
    try:
        with client_for(ctx) as client:
            targets = list(ids) or [j.id for j in client.list_jobs(page_size=1000, **filters)]
            if not targets:
                click.echo("no jobs match")
                return
            if len(targets) > 1 and not yes:
                click.confirm(f"{verb} {len(targets)} jobs?", abort=True)
            changed, rejected = 0, []
            with Progress(transient=True, disable=len(targets) < CHUNK) as progress:
                task = progress.add_task(verb, total=len(targets))
                for i in range(0, len(targets), CHUNK):
                    result = apply(client, targets[i : i + CHUNK])
                    changed += len(result.changed)
                    rejected.extend(result.rejected)
                    progress.advance(task, CHUNK)
    except PyQueueError as exc:
        fail(exc)
    click.echo(f"{verb}: {changed} changed, {len(rejected)} refused")
    for r in rejected[:20]:
        click.echo(f"  {r.id}: {r.code}: {r.message}", err=True)
    if rejected:
        raise SystemExit(1)


@click.command()
@click.argument("ids", nargs=-1, type=int)
@filter_options
@click.option("--set-queue", help="Move to this queue.")
@click.option("--priority", type=int)
@click.option("--run-at", type=click.DateTime(), help="Schedule for this time (local).")
@click.option("--now", "ready_now", is_flag=True, help="Make scheduled jobs ready now.")
@click.option("--max-retries", type=int)
@click.option("--payload", help="A new payload, as JSON.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def update(
    ctx: click.Context,
    ids: tuple[int, ...],
    queues: tuple[str, ...],
    types: tuple[str, ...],
    statuses: tuple[str, ...],
    set_queue: str | None,
    priority: int | None,
    run_at: datetime | None,
    ready_now: bool,
    max_retries: int | None,
    payload: str | None,
    yes: bool,
) -> None:
    """Change waiting jobs: by id, or every job matching --queue/--type/--status."""
    changes: dict[str, Any] = {"queue": set_queue, "priority": priority, "max_retries": max_retries}
    if ready_now:
        changes["run_at"] = None
    elif run_at is not None:
        changes["run_at"] = run_at.astimezone()
    changes["payload"] = json.loads(payload) if payload is not None else UNSET
    if not ids and not (queues or types or statuses):
        raise click.UsageError("give job ids, or a filter (--queue, --type, --status)")
    _bulk(
        ctx,
        "update",
        ids,
        _filters(queues, types, statuses),
        yes,
        lambda client, chunk: client.update_jobs(changes, ids=chunk),
    )


@click.command()
@click.argument("ids", nargs=-1, type=int)
@filter_options
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def delete(
    ctx: click.Context,
    ids: tuple[int, ...],
    queues: tuple[str, ...],
    types: tuple[str, ...],
    statuses: tuple[str, ...],
    yes: bool,
) -> None:
    """Delete jobs: by id, or every job matching --queue/--type/--status."""
    if not ids and not (queues or types or statuses):
        raise click.UsageError("give job ids, or a filter (--queue, --type, --status)")
    _bulk(
        ctx,
        "delete",
        ids,
        _filters(queues, types, statuses),
        yes,
        lambda client, chunk: client.delete_jobs(ids=chunk),
    )


@click.command()
@click.argument("ids", nargs=-1, type=int)
@click.option("--queue", "queues", multiple=True, help="Only this queue's dead jobs (repeatable).")
@click.option("--type", "types", multiple=True, help="Only dead jobs of this type (repeatable).")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def retry(
    ctx: click.Context, ids: tuple[int, ...], queues: tuple[str, ...], types: tuple[str, ...], yes: bool
) -> None:
    """Run dead jobs again: by id, or every dead job matching --queue/--type. They keep their
    error history and get their retries again."""
    if not ids and not (queues or types):
        raise click.UsageError("give job ids, or a filter (--queue, --type)")
    _bulk(
        ctx,
        "retry",
        ids,
        _filters(queues, types, ("dead",)),
        yes,
        lambda client, chunk: client.retry_jobs(ids=chunk),
    )


@click.command()
@click.argument("ids", nargs=-1, type=int)
@filter_options
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def cancel(
    ctx: click.Context,
    ids: tuple[int, ...],
    queues: tuple[str, ...],
    types: tuple[str, ...],
    statuses: tuple[str, ...],
    yes: bool,
) -> None:
    """Cancel jobs: by id, or every waiting or running job matching --queue/--type/--status. A
    running job's worker is told; the job ends cancelled, never retried."""
    if not ids and not (queues or types or statuses):
        raise click.UsageError("give job ids, or a filter (--queue, --type, --status)")
    filters = _filters(queues, types, statuses or ("scheduled", "ready", "in_flight"))
    _bulk(ctx, "cancel", ids, filters, yes, lambda client, chunk: client.cancel_jobs(ids=chunk))


@click.command()
@click.argument("queue")
@click.option(
    "--max-running", type=click.IntRange(0), default=0, help="At most this many in flight (0: no cap)."
)
@click.option("--rate", default=None, help="At most this rate, as N/s, N/m or N/h (for example 100/s).")
@click.option(
    "--burst",
    type=click.FloatRange(0),
    default=0,
    help="Jobs the rate lets go at once (default: one second's worth).",
)
@click.option(
    "--key-max-running",
    type=click.IntRange(0),
    default=0,
    help="At most this many in flight per limit key (jobs enqueued with limit_key; 0: no cap).",
)
@click.option("--clear", is_flag=True, help="Remove the queue's limits.")
@click.pass_context
def limit(
    ctx: click.Context,
    queue: str,
    max_running: int,
    rate: str | None,
    burst: float,
    key_max_running: int,
    clear: bool,
) -> None:
    """Limit QUEUE across all its workers: how many of its jobs run at once (in all, and per limit
    key), and how fast they start. Limited jobs stay ready and go out the moment they are allowed.
    Replaces earlier limits."""
    if clear == bool(max_running or rate or key_max_running):
        raise click.UsageError("give --max-running, --rate and/or --key-max-running, or --clear")
    try:
        with client_for(ctx) as client:
            info = client.set_queue_limit(
                queue, max_running=max_running, rate=rate, burst=burst, key_max_running=key_max_running
            )
    except (PyQueueError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{queue}: {info.limits or 'no limits'}")


@click.command()
@click.argument("queue")
@click.option("--yes", is_flag=True, help="Pause a queue that does not exist yet without asking.")
@click.pass_context
def pause(ctx: click.Context, queue: str, yes: bool) -> None:
    """Stop delivering QUEUE's jobs (enqueues still go in)."""
    try:
        with client_for(ctx) as client:
            known = {q.name for q in client.queues()} | {q for w in client.workers() for q in w.queues}
            if queue not in known and not yes:
                # A typo would otherwise make a new, paused queue and leave the real one running.
                click.echo(f"warning: no queue named {queue!r} has jobs or workers now", err=True)
                click.confirm(f"pause {queue!r} anyway (its jobs will wait once they come)?", abort=True)
            client.pause(queue)
    except PyQueueError as exc:
        fail(exc)
    click.echo(f"{queue}: paused")


@click.command()
@click.argument("queue")
@click.pass_context
def resume(ctx: click.Context, queue: str) -> None:
    """Deliver QUEUE's jobs again."""
    try:
        with client_for(ctx) as client:
            client.resume(queue)
    except PyQueueError as exc:
        fail(exc)
    click.echo(f"{queue}: running")
