"""Salvaging a store's damaged write-ahead logs, for `pyqueue repair`: each log with damage is
rewritten keeping every write batch that is whole (native/src/wal.rs says why RocksDB's own
salvage cannot open such a log), and the original is kept beside it as NAME.damaged."""

import os
from pathlib import Path

from pyqueue._native import salvage_wal


def salvage_logs(store_dir: Path) -> list[str]:
    """Rewrite the damaged logs of one store; what was done, a line per log rewritten."""
    done = []
    for log in sorted(store_dir.glob("*.log")):
        raw = log.read_bytes()
        if not raw:
            continue
        fixed, kept, dropped = salvage_wal(raw)
        if not dropped:
            continue
        os.replace(log, log.with_name(log.name + ".damaged"))
        with open(log, "wb") as out:
            out.write(fixed)
            out.flush()
            os.fsync(out.fileno())
        done.append(
            f"{log.name}: kept {kept} whole write batches, dropped {dropped} damaged spans "
            f"(the original is {log.name}.damaged)"
        )
    if done:
        directory = os.open(store_dir, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    return done
