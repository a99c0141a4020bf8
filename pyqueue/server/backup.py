"""`pyqueue backup` on the server's side: a consistent copy of each shard's store (a RocksDB
checkpoint, with its durable mark) and of the layout, into a directory that must not exist yet on
the server's machine. The copy is taken while serving; commits that race it are in it or not,
whole. `pyqueue restore` (cli/backup.py) puts one back into a stopped server's data dir.
"""

import os
from pathlib import Path

from pyqueue.cluster import SLOTS
from pyqueue.engine.errors import FailedPrecondition, InvalidArgument
from pyqueue.store.contract import Store
from pyqueue.store.json_files import write_json

PATH_MAX = 4096  # Linux's, bytes with the final NUL
NAME_MAX = 255  # one name in a path, bytes
_NOT_STORAGE = ("/proc", "/sys", "/dev")  # kernel filesystems: nothing can be stored there


def check_path(path: str) -> Path:
    """The backup path as the server can use it, else INVALID_ARGUMENT saying why (nothing is
    looked at on disk yet)."""
    shown = path if len(path) <= 80 else path[:80] + "..."
    target = Path(path)
    if not path or not target.is_absolute():
        raise InvalidArgument(f"the backup path must be absolute, on the server's machine (got {shown!r})")
    if "\0" in path:
        raise InvalidArgument(f"the backup path {shown!r} holds a NUL byte")
    long = next((part for part in target.parts if len(part.encode()) > NAME_MAX), None)
    if long is not None:
        raise InvalidArgument(f"{long[:40]!r}... in the backup path is over {NAME_MAX} bytes, a name's most")
    if len(path.encode()) >= PATH_MAX:
        raise InvalidArgument(f"the backup path is {len(path.encode())} bytes; a path is under {PATH_MAX}")
    if any(target == Path(root) or Path(root) in target.parents for root in _NOT_STORAGE):
        raise InvalidArgument(
            f"{shown} is on a kernel filesystem ({', '.join(_NOT_STORAGE)}): give a disk's path"
        )
    return target


def _target(path: str) -> Path:
    target = check_path(path)
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
    try:
        os.mkdir(target)
        write_json(target / "cluster.json", {"shards": shards, "slots": SLOTS})
    except OSError as exc:
        raise FailedPrecondition(f"cannot make the backup directory {target}: {exc.strerror}") from None
