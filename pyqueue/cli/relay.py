"""`pyqueue relay --database URL`: move the app's committed outbox rows to the server
(pyqueue.contrib.relay); also a thread of `pyqueue worker --relay URL`."""

import signal
import threading
from typing import TYPE_CHECKING

import click

from pyqueue.cli.logs import log_options, setup_logging

if TYPE_CHECKING:
    from pyqueue.contrib.relay import OutboxRelay


def start_relay(database: str, address: str, table: str, batch: int, keep: float) -> "OutboxRelay":
    """A started relay thread (the caller stops it); needs the sqlalchemy extra."""
    try:
        from pyqueue.contrib.relay import OutboxRelay, RelayConfig
    except ImportError as exc:
        raise click.ClickException(
            f'the relay needs SQLAlchemy: pip install "pyqueue[sqlalchemy]" ({exc})'
        ) from None
    from pyqueue.client import Client

    config = RelayConfig(database=database, table=table, batch=batch, keep_s=keep)
    try:
        relay = OutboxRelay(config, Client(address))
    except ModuleNotFoundError as exc:  # the database's driver
        raise click.ClickException(
            f'cannot open the outbox at {database}: {exc} (PostgreSQL: pip install "pyqueue[postgres]")'
        ) from None
    except Exception as exc:  # a bad URL, a database that is not there: say so and exit
        raise click.ClickException(f"cannot open the outbox at {database}: {exc}") from None
    relay.start()
    return relay


@click.command()
@click.option(
    "--database",
    required=True,
    help="The app's database, as a SQLAlchemy URL (postgresql://... uses psycopg 3 and waits on LISTEN/NOTIFY).",
)
@click.option("--table", default="pyqueue_outbox", show_default=True)
@click.option(
    "--batch", default=500, show_default=True, type=click.IntRange(1, 10_000), help="Rows per enqueue call."
)
@click.option(
    "--keep",
    default=3600.0,
    show_default=True,
    type=click.FloatRange(0),
    help="Seconds a relayed job stays findable by its row's key (how long a relay may be down "
    "between the server's answer and the delete without making a duplicate).",
)
@log_options
@click.pass_context
def relay(
    ctx: click.Context, database: str, table: str, batch: int, keep: float, log_level: str, log_format: str
) -> None:
    """Move committed outbox rows to the server, oldest first, until SIGINT or SIGTERM."""
    setup_logging(log_level, log_format)
    done = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: done.set())
    running = start_relay(database, ctx.obj["address"], table, batch, keep)
    click.echo(f"relaying {table} of {database} to {ctx.obj['address']}", err=True)
    done.wait()
    running.stop()
