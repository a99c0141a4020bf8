"""The durable mark: how far this store's acknowledged commits went, kept beside its files, so that
a write-ahead log that was deleted or cut is found at the next start instead of serving an older
store as if nothing happened (RocksDB opens a store whose log is gone without a word, at the
sequence its table files reached).

The server writes the mark (engine/services/durable_marker.py): the store's latest sequence, read before a
sync of the log, so every commit up to it is on disk. At open, a store whose latest sequence is
below its mark has lost acknowledged commits. `pyqueue repair` accepts the loss and moves the mark
down; `pyqueue restore` writes the mark of the backup it restores.
"""

from pathlib import Path

from pyqueue.store.json_files import MetadataError, read_json, write_json

MARK_FILE = "pyqueue-durable.json"


def read_mark(store_dir: Path) -> int | None:
    """The sequence every acknowledged commit reached (None: no mark yet, a new store)."""
    path = store_dir / MARK_FILE
    if not path.exists():
        return None
    value = read_json(
        path, ("sequence",), "delete it to skip this check once (pyqueue check verifies the store)"
    )
    if not isinstance(value["sequence"], int) or value["sequence"] < 0:
        raise MetadataError(
            f"{path} is damaged (sequence is {value['sequence']!r}); delete it to skip this check once"
        )
    return int(value["sequence"])


def write_mark(store_dir: Path, sequence: int) -> None:
    write_json(store_dir / MARK_FILE, {"sequence": sequence})


def lost_commits(store_dir: Path, latest: int) -> str:
    """Why a store whose latest sequence is `latest` lost acknowledged commits ('' if it did not)."""
    try:
        mark = read_mark(store_dir)
    except MetadataError as exc:
        return str(exc)
    if mark is None or latest >= mark:
        return ""
    return (
        f"{store_dir} lost acknowledged commits: its store ends at sequence {latest}, but commits up "
        f"to sequence {mark} were acknowledged ({MARK_FILE}). Its write-ahead log (*.log) was deleted "
        "or cut. Nothing was changed. Restore the data dir from a backup (pyqueue restore), or serve "
        f"what is left and lose those commits for good: pyqueue repair --data-dir {store_dir}"
    )
