"""`pyqueue serve`."""

import logging
from pathlib import Path

import click


@click.command()
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    default="./pyqueue-data",
    show_default=True,
    help="Where the RocksDB store lives.",
)
@click.option(
    "--listen", default="127.0.0.1:7411", show_default=True, help="HOST:PORT to listen on (port 0: any)."
)
@click.option(
    "--commit-mode",
    type=click.Choice(["fsync", "buffered"]),
    default="fsync",
    show_default=True,
    help="fsync: answer once on disk. buffered: once written to the OS.",
)
@click.option(
    "--heartbeat",
    "heartbeat_s",
    type=float,
    default=3.0,
    show_default=True,
    help="Seconds of silence on a Take stream before the server sends a heartbeat.",
)
@click.option(
    "--worker-timeout",
    "worker_timeout_s",
    type=float,
    default=15.0,
    show_default=True,
    help="Seconds after which a silent worker host is declared gone (keepalive, TCP_USER_TIMEOUT).",
)
@click.option("--max-payload-bytes", type=int, default=1 << 20, show_default=True)
@click.option("--max-jobs-per-enqueue", type=int, default=1000, show_default=True)
@click.option("--max-name-length", type=int, default=128, show_default=True)
@click.option("--max-prefetch", type=int, default=10_000, show_default=True)
@click.option(
    "--max-retries", type=int, default=25, show_default=True, help="Default retries before a job is dead."
)
@click.option(
    "--backoff",
    nargs=3,
    type=float,
    default=(15.0, 4.0, 10.0),
    show_default=True,
    metavar="BASE EXPONENT JITTER",
    help="Default retry delay in seconds: attempt^EXPONENT + BASE + random * JITTER * (attempt + 1).",
)
@click.option(
    "--max-worker-losses",
    type=int,
    default=3,
    show_default=True,
    help="A job whose workers were lost this many times is dead.",
)
@click.option(
    "--keep-completed",
    type=float,
    default=0.0,
    show_default=True,
    help="Seconds to keep completed jobs (0: delete at the ack).",
)
@click.option(
    "--keep-dead",
    type=float,
    default=7 * 24 * 3600.0,
    show_default=True,
    help="Seconds to keep dead jobs and their error history.",
)
@click.option(
    "--min-free-bytes",
    type=int,
    default=128 << 20,
    show_default=True,
    help="Refuse enqueues while the data directory's disk has less free space than this.",
)
@click.option("--log-level", default="info", show_default=True)
def serve(
    data_dir: Path,
    listen: str,
    commit_mode: str,
    heartbeat_s: float,
    worker_timeout_s: float,
    max_payload_bytes: int,
    max_jobs_per_enqueue: int,
    max_name_length: int,
    max_prefetch: int,
    max_retries: int,
    backoff: tuple[float, float, float],
    max_worker_losses: int,
    keep_completed: float,
    keep_dead: float,
    min_free_bytes: int,
    log_level: str,
) -> None:
    """Run the server on an embedded store in DATA_DIR."""
    from pyqueue.engine.limits import Limits
    from pyqueue.engine.retry import RetryPolicy
    from pyqueue.server import ServerConfig
    from pyqueue.server import serve as run_server

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    limits = Limits(
        max_payload_bytes=max_payload_bytes,
        max_jobs_per_enqueue=max_jobs_per_enqueue,
        max_name_length=max_name_length,
        max_prefetch=max_prefetch,
    )
    run_server(
        ServerConfig(
            data_dir=data_dir,
            listen=listen,
            commit_mode=commit_mode,
            heartbeat_s=heartbeat_s,
            worker_timeout_s=worker_timeout_s,
            limits=limits,
            min_free_bytes=min_free_bytes,
            retry=RetryPolicy(
                max_retries=max_retries,
                base_s=backoff[0],
                exponent=backoff[1],
                jitter_s=backoff[2],
                max_worker_losses=max_worker_losses,
                keep_completed_ms=int(keep_completed * 1000),
                keep_dead_ms=int(keep_dead * 1000),
            ),
        )
    )
