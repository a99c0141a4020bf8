"""`pyqueue top`: every queue, live, refreshed each second; keys pause or resume the selected one.

Each refresh reads the queue counts, the workers and the metrics (one call each, through the
public address, so a sharded server is seen whole); rates are the change of the enqueued and
completed counters since the last refresh.
"""

import os
import select
import sys
import termios
import time
import tty
from dataclasses import dataclass

import click
from rich.console import Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from pyqueue.cli.jobs import client_for
from pyqueue.client import Client
from pyqueue.errors import PyQueueError

HELP = "↑/↓ or j/k select · p pause · r resume · q quit"


@dataclass
class Sample:
    at: float
    queues: dict[str, tuple[bool, dict[str, int]]]  # name -> (paused, counts by status)
    workers: dict[str, int]
    totals: dict[tuple[str, str], float]  # (event, queue) -> counter value
    oldest: dict[str, float]  # queue -> oldest ready age, seconds


@dataclass
class Row:
    queue: str
    paused: bool
    counts: dict[str, int]
    workers: int
    enqueued_per_s: float
    completed_per_s: float
    oldest_s: float


def take_sample(client: Client) -> Sample:
    from prometheus_client.parser import text_string_to_metric_families  # only when top runs

    queues = {q.name: (q.paused, q.counts) for q in client.queues()}
    workers: dict[str, int] = {}
    for w in client.workers():
        for queue in w.queues:
            workers[queue] = workers.get(queue, 0) + 1
    totals: dict[tuple[str, str], float] = {}
    oldest: dict[str, float] = {}
    for family in text_string_to_metric_families(client.metrics()):
        for s in family.samples:
            queue = s.labels.get("queue", "")
            if s.name in ("pyqueue_jobs_enqueued_total", "pyqueue_jobs_completed_total"):
                totals[s.name, queue] = s.value
            elif s.name == "pyqueue_queue_oldest_ready_seconds":
                oldest[queue] = s.value
    return Sample(time.monotonic(), queues, workers, totals, oldest)


def rows(before: Sample | None, now: Sample) -> list[Row]:
    def rate(name: str, queue: str) -> float:
        if before is None or now.at <= before.at:
            return 0.0
        delta = now.totals.get((name, queue), 0.0) - before.totals.get((name, queue), 0.0)
        return max(delta, 0.0) / (now.at - before.at)

    return [
        Row(
            name,
            paused,
            counts,
            now.workers.get(name, 0),
            rate("pyqueue_jobs_enqueued_total", name),
            rate("pyqueue_jobs_completed_total", name),
            now.oldest.get(name, 0.0),
        )
        for name, (paused, counts) in sorted(now.queues.items())
    ]


def render(table_rows: list[Row], selected: int, address: str, note: str) -> Group:
    table = Table(title=f"pyqueue top · {address}", expand=True)
    for heading in (
        "queue",
        "ready",
        "scheduled",
        "in flight",
        "dead",
        "enqueued/s",
        "completed/s",
        "oldest ready",
        "workers",
    ):
        table.add_column(heading, justify="left" if heading == "queue" else "right")
    for i, row in enumerate(table_rows):
        name = row.queue + (" (paused)" if row.paused else "")
        table.add_row(
            name,
            *(str(row.counts.get(s, 0)) for s in ("ready", "scheduled", "in_flight", "dead")),
            f"{row.enqueued_per_s:,.1f}",
            f"{row.completed_per_s:,.1f}",
            f"{row.oldest_s:,.1f}s" if row.oldest_s else "-",
            str(row.workers),
            style="reverse" if i == selected else None,
        )
    if not table_rows:
        table.add_row("no queue yet", *[""] * 8)
    return Group(table, Text(note or HELP, style="dim" if not note else "bold"))


def _keys(fd: int, timeout: float) -> str:
    ready, _, _ = select.select([fd], [], [], timeout)
    return os.read(fd, 16).decode(errors="ignore") if ready else ""


@click.command()
@click.option("--every", type=float, default=1.0, show_default=True, help="Seconds between refreshes.")
@click.pass_context
def top(ctx: click.Context, every: float) -> None:
    """A live view of every queue: counts, rates, oldest ready job, workers. Keys: p pause, r resume, q quit."""
    if not sys.stdin.isatty():
        raise click.ClickException("pyqueue top needs a terminal (use `pyqueue queues` in scripts)")
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    client = client_for(ctx)
    before: Sample | None = None
    table_rows: list[Row] = []
    selected, note = 0, ""
    try:
        tty.setcbreak(fd)
        with Live(screen=True, auto_refresh=False) as live:
            next_refresh = 0.0
            while True:
                if time.monotonic() >= next_refresh:
                    try:
                        now = take_sample(client)
                        table_rows, before = rows(before, now), now
                    except PyQueueError as exc:
                        note = f"the server did not answer: {exc}"
                    next_refresh = time.monotonic() + every
                selected = min(selected, max(len(table_rows) - 1, 0))
                live.update(render(table_rows, selected, ctx.obj["address"], note), refresh=True)
                keys = _keys(fd, max(next_refresh - time.monotonic(), 0.0))
                if "q" in keys:
                    return
                if "\x1b[A" in keys or "k" in keys:
                    selected = max(selected - 1, 0)
                if "\x1b[B" in keys or "j" in keys:
                    selected = min(selected + 1, max(len(table_rows) - 1, 0))
                if table_rows and ("p" in keys or "r" in keys):
                    queue = table_rows[selected].queue
                    try:
                        (client.pause if "p" in keys else client.resume)(queue)
                        note = f"{'paused' if 'p' in keys else 'resumed'} {queue}"
                    except PyQueueError as exc:
                        note = f"could not change {queue}: {exc}"
                    next_refresh = 0.0
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        client.close()
