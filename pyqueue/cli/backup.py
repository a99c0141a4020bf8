"""`pyqueue backup DIR` (the running server copies its store into DIR, on its machine) and
`pyqueue restore BACKUP --data-dir D` (a stopped server's data dir, put back from a backup)."""

import os
import shutil
import time
from pathlib import Path

import click

from pyqueue import defaults
from pyqueue.cli.jobs import client_for, fail
from pyqueue.errors import PyQueueError


@click.command()
@click.argument("directory", type=click.Path(path_type=Path))
@click.pass_context
def backup(ctx: click.Context, directory: Path) -> None:
    """Copy the running server's store into DIRECTORY, a new directory on the server's machine,
    while it serves (a RocksDB checkpoint per shard). Restore it with `pyqueue restore`."""
    target = str(directory.absolute())
    try:
        with client_for(ctx) as client:
            sequences = client.backup(target)
    except PyQueueError as exc:
        fail(exc)
    shards = f"{len(sequences)} shards" if len(sequences) > 1 else "1 store"
    click.echo(f"backed up {shards} to {target} (at sequence {', '.join(map(str, sequences))})")


@click.command()
@click.argument("source", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--data-dir", type=click.Path(path_type=Path), default=defaults.DATA_DIR, show_default=True)
@click.option(
    "--replace",
    is_flag=True,
    help="The data dir holds a store: move it aside (DATA_DIR.before-restore-TIME) and restore.",
)
def restore(source: Path, data_dir: Path, replace: bool) -> None:
    """Put a backup (`pyqueue backup`) back as DATA_DIR, for a stopped server. The data dir must
    be empty or absent, or --replace moves the store in it aside (nothing is deleted)."""
    from pyqueue.store import RocksStore, StoreDamagedError

    if not (source / "cluster.json").exists() and not (source / "CURRENT").exists():
        raise click.ClickException(f"{source} is not a pyqueue backup (no cluster.json, no CURRENT)")
    for lock, posix in ((data_dir / "supervisor.lock", False), (data_dir / "LOCK", True)):
        if lock.exists() and _held(lock, posix):
            raise click.ClickException(f"{data_dir} is in use by a running server: stop it first")
    held = [p for p in data_dir.iterdir() if p.name != "supervisor.lock"] if data_dir.exists() else []
    if held:
        if not replace:
            raise click.ClickException(
                f"{data_dir} is not empty: give --replace to move its store aside, or another --data-dir"
            )
        aside = data_dir.with_name(f"{data_dir.name}.before-restore-{time.strftime('%Y%m%d-%H%M%S')}")
        os.rename(data_dir, aside)
        click.echo(f"moved the store that was there to {aside}")
    elif data_dir.exists():
        shutil.rmtree(data_dir)  # empty, or a refused start's lock file only
    shutil.copytree(source, data_dir, symlinks=False)
    (data_dir / "supervisor.lock").unlink(missing_ok=True)
    stores = sorted(data_dir.glob("shard-*")) if (data_dir / "cluster.json").exists() else [data_dir]
    for path in stores:
        try:
            RocksStore(path, read_only=True, create=False).close()  # it opens: a whole copy
        except StoreDamagedError as exc:
            raise click.ClickException(f"the restored {path} does not open: {exc}") from None
    click.echo(
        f"restored {source} to {data_dir}: start the server on it (pyqueue serve --data-dir {data_dir})"
    )


def _held(lock: Path, posix: bool) -> bool:
    """Whether a process holds the lock file: the supervisor's (flock) or RocksDB's (a POSIX lock)."""
    import fcntl

    take = fcntl.lockf if posix else fcntl.flock
    with open(lock, "a") as handle:
        try:
            take(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # BlockingIOError, or EACCES/EAGAIN from a POSIX lock
            return True
        take(handle, fcntl.LOCK_UN)
        return False
