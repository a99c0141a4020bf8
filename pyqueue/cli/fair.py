"""`pyqueue queues --keys QUEUE [--weight KEY=N ...]`: a queue's fair keys, and their weights."""

import json

import click
from rich.console import Console

from pyqueue.cli.fit import FitColumn, fit_table
from pyqueue.cli.jobs import client_for, fail
from pyqueue.client import FairKeys
from pyqueue.errors import PyQueueError


def parse_weight(text: str) -> tuple[str, int]:
    """KEY=N (an empty KEY weighs the jobs without a fair key)."""
    fair_key, sep, number = text.rpartition("=")
    if not sep or not number.isdigit():
        raise click.BadParameter(
            f"{text!r} is not KEY=N (a whole number N, 1 to 10000)", param_hint="--weight"
        )
    return fair_key, int(number)


def show_keys(ctx: click.Context, queue: str, weights: tuple[str, ...], limit: int, as_json: bool) -> None:
    """Set the weights given, then show the queue's busiest fair keys."""
    changes = [parse_weight(text) for text in weights]
    try:
        with client_for(ctx) as client:
            for fair_key, weight in changes:
                client.set_fair_weight(queue, fair_key, weight)
            found = client.fair_keys(queue, limit)
    except PyQueueError as exc:
        fail(exc)
    if as_json:
        click.echo(json.dumps(_as_dict(found), indent=2))
        return
    columns = [FitColumn("fair key", 0, wrap=True), FitColumn("waiting", 0), FitColumn("oldest", 1)]
    columns.append(FitColumn("weight", 0))
    rows = [[k.fair_key, str(k.waiting), f"{k.oldest_seconds:.1f}s", str(k.weight)] for k in found.keys]
    console = Console()
    console.print(f"{queue}: {found.key_count} fair keys with jobs waiting")
    console.print(fit_table(columns, rows))
    if found.weights:
        set_ = ", ".join(f"{k or '(no key)'}={w}" for k, w in sorted(found.weights.items()))
        console.print(f"weights set: {set_}")


def _as_dict(found: FairKeys) -> dict[str, object]:
    return {
        "queue": found.queue,
        "key_count": found.key_count,
        "keys": [
            {
                "fair_key": k.fair_key,
                "waiting": k.waiting,
                "oldest_seconds": k.oldest_seconds,
                "weight": k.weight,
            }
            for k in found.keys
        ],
        "weights": found.weights,
    }
