"""`pyqueue worker MODULE:APP`."""

import os
import sys

import click

from pyqueue.cli.logs import log_options, setup_logging
from pyqueue.worker.runtime import WorkerConfig


def load_app(target: str) -> object:
    from pyqueue.worker.loading import load_app as load

    try:
        return load(target)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="APP") from None


@click.command()
@click.argument("target", metavar="MODULE:APP")
@click.option(
    "--queues",
    "--queue",
    "-Q",
    multiple=True,
    help="Queues to take jobs from: comma-separated, or the option repeated (default: the app's job queues).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 2500),
    default=None,
    help="Jobs run at once. Default: 10, or 50 when every job function is async def (and the pool "
    "is thread): an async slot costs a coroutine, not a thread.",
)
@click.option(
    "--grace",
    type=float,
    default=WorkerConfig.grace_s,
    show_default=True,
    help="Seconds running jobs get to finish after SIGTERM.",
)
@click.option(
    "--pool",
    type=click.Choice(["thread", "process"]),
    default=WorkerConfig.pool,
    show_default=True,
    help="Where sync handlers run: threads (a job past its time limit is abandoned) or child "
    "processes (it is killed).",
)
@click.option(
    "--processes",
    type=click.IntRange(1, 256),
    default=1,
    show_default=True,
    help="Worker processes to run (each with --concurrency slots and its own stream): one per core "
    "uses them all.",
)
@click.option("--log-jobs", is_flag=True, help="Log one INFO line per finished job.")
@click.option(
    "--summary-every",
    type=float,
    default=WorkerConfig.summary_s,
    show_default=True,
    help="Seconds between summary lines (done, failed, timed out; 0: none).",
)
@click.option(
    "--relay",
    "relay_database",
    default=None,
    help="Also relay the app's outbox from this database (a SQLAlchemy URL), as `pyqueue relay` does.",
)
@log_options
@click.pass_context
def worker(
    ctx: click.Context,
    target: str,
    queues: tuple[str, ...],
    concurrency: int | None,
    grace: float,
    pool: str,
    processes: int,
    log_jobs: bool,
    summary_every: float,
    relay_database: str | None,
    log_level: str,
    log_format: str,
) -> None:
    """Run the job functions of MODULE:APP on jobs from the server."""
    from pyqueue.app import App
    from pyqueue.worker.runtime import WorkerConfig, run_worker

    setup_logging(log_level, log_format)
    os.environ.setdefault("PYQUEUE_WORKER_NAME", f"pyqueue worker {target}")  # ListWorkers shows it
    if processes > 1 and relay_database:
        raise click.BadParameter(
            "give --relay to a worker of one process (or run `pyqueue relay`)", param_hint="--relay"
        )
    if processes > 1:
        from pyqueue.worker.processes import run_processes

        load_app(target)  # a bad MODULE:APP is refused here, once, not by every child
        raise SystemExit(run_processes(processes, sys.argv[1:]))
    app = load_app(target)
    if not isinstance(app, App):
        raise click.BadParameter(f"{target} is not a pyqueue.App", param_hint="APP")
    if ctx.obj and ctx.obj.get("address_given"):
        app.address = ctx.obj["address"]
    config = WorkerConfig(
        queues=tuple(dict.fromkeys(q for given in queues for q in given.split(",") if q)),
        concurrency=concurrency,
        grace_s=grace,
        pool=pool,
        target=target,
        log_jobs=log_jobs,
        summary_s=summary_every,
    )
    relaying = None
    if relay_database:
        from pyqueue.cli.relay import start_relay

        relaying = start_relay(relay_database, app.address, "pyqueue_outbox", 500, 3600.0)
    try:
        code = run_worker(app, config)
    finally:
        if relaying is not None:
            relaying.stop()
    raise SystemExit(code)
