"""`pyqueue backup` on the server's side: a consistent copy of each shard's store (a RocksDB
checkpoint, with its durable mark) and of the layout, into a directory that must not exist yet on
the server's machine. The copy is taken while serving; commits that race it are in it or not,
whole. `pyqueue restore` (cli/backup.py) puts one back into a stopped server's data dir.
"""

import os
from pathlib import Path

from pyqueue.cluster import SLOTS
from pyqueue.cluster.metadata import write_json
from pyqueue.engine.errors import FailedPrecondition, InvalidArgument
from pyqueue.store.contract import Store


def _target(path: str) -> Path:
    target = Path(path)
    if not path or not target.is_absolute():
        raise InvalidArgument(f"the backup path must be absolute, on the server's machine (got {path!r})")
    if target.exists():
        raise FailedPrecondition(f"{target} exists already: a backup goes into a new directory")
    if not target.parent.is_dir():
        raise FailedPrecondition(f"{target.parent} is not a directory on the server's machine")
    return target


def checkpoint(store: Store, path: str) -> int:
    """Copy one store to `path`; the sequence the copy ends at."""
    target = _target(path)
    make = getattr(store, "checkpoint", None)
    if make is None:
        raise FailedPrecondition("this store cannot make checkpoints")
    try:
        return int(make(target))
    except Exception as exc:  # RocksDB's own words: a full disk, another filesystem, ...
        raise FailedPrecondition(f"the backup to {target} failed: {exc}") from exc


def prepare_layout(path: str, shards: int) -> None:
    """A sharded backup's directory and its layout (cluster.json), before the shards fill it."""
    target = _target(path)
    os.mkdir(target)
    write_json(target / "cluster.json", {"shards": shards, "slots": SLOTS})
