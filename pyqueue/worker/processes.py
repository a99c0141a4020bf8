"""`pyqueue worker --processes N`: one command that uses every core. The parent starts N worker
processes (fresh interpreters, the same command without --processes), forwards SIGTERM and SIGINT
to them, and exits once they have, with the worst exit code. Each child is a whole worker: its own
stream, its own graceful shutdown."""

import logging
import os
import signal
import subprocess
import sys
from types import FrameType

log = logging.getLogger("pyqueue.worker")


def without_processes(argv: list[str]) -> list[str]:
    """The command line a child runs: this one, less `--processes N`."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--processes":
            skip = True
            continue
        if arg.startswith("--processes="):
            continue
        out.append(arg)
    return out


def run_processes(n: int, argv: list[str]) -> int:
    command = [sys.executable, "-m", "pyqueue", *without_processes(argv)]
    children = [subprocess.Popen(command) for _ in range(n)]
    log.info("started %d worker processes: %s", n, ", ".join(str(c.pid) for c in children))

    def forward(signum: int, frame: FrameType | None) -> None:
        for child in children:
            if child.poll() is None:
                os.kill(child.pid, signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    codes = [child.wait() for child in children]
    return max((abs(c) for c in codes), default=0)
