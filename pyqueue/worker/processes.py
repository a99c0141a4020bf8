"""`pyqueue worker --processes N`: one command that uses every core. The parent starts N worker
processes (fresh interpreters, the same command without --processes), forwards SIGTERM and SIGINT
to them, and exits once they have, with the worst exit code. Each child is a whole worker: its own
stream, its own graceful shutdown.

A child still starting when the signal arrives (its interpreter up, its handlers not yet installed)
dies of it. That is a clean stop: before its handlers it has no stream, so it holds no job."""

import logging
import os
import signal
import subprocess
from types import FrameType

from pyqueue.children import child_environment, pyqueue_command

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
    command = pyqueue_command(*without_processes(argv))
    children = [subprocess.Popen(command, env=child_environment()) for _ in range(n)]
    log.info("started %d worker processes: %s", n, ", ".join(str(c.pid) for c in children))

    forwarded: set[int] = set()

    def forward(signum: int, frame: FrameType | None) -> None:
        forwarded.add(signum)
        for child in children:
            if child.poll() is None:
                os.kill(child.pid, signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, forward)
    codes = [exit_code(child.wait(), forwarded) for child in children]
    return max(codes, default=0)


def exit_code(returncode: int, forwarded: set[int]) -> int:
    """A child's code as the parent reports it: killed by a signal we forwarded is a clean stop;
    killed by another signal is 128 + its number, as a shell reports it."""
    if returncode >= 0:
        return returncode
    return 0 if -returncode in forwarded else 128 - returncode
