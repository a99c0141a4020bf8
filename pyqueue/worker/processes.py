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
import time

from pyqueue.children import child_environment, pyqueue_command

log = logging.getLogger("pyqueue.worker")
FORWARD_EVERY_S = 0.05  # how soon a signal reaches the children, and the parent sees them exit


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
    # The handlers are in place before the first child starts, and they only note the signal:
    # the loop below forwards it. (Installed after the children, a SIGTERM in between killed the
    # parent and left its children running, with no one to stop them.)
    signals: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: signals.append(signum))
    command = pyqueue_command(*without_processes(argv))
    children: list[subprocess.Popen[bytes]] = []
    for _ in range(n):
        if signals:
            break  # stopped while starting: start no more
        children.append(subprocess.Popen(command, env=child_environment()))
    log.info("started %d worker processes: %s", len(children), ", ".join(str(c.pid) for c in children))
    forwarded = 0
    while True:
        for signum in signals[forwarded:]:
            for child in children:
                if child.poll() is None:
                    os.kill(child.pid, signum)
            forwarded += 1
        if all(child.poll() is not None for child in children):
            break
        time.sleep(FORWARD_EVERY_S)
    return max((exit_code(child.returncode, set(signals)) for child in children), default=0)


def exit_code(returncode: int, forwarded: set[int]) -> int:
    """A child's code as the parent reports it: killed by a signal we forwarded is a clean stop;
    killed by another signal is 128 + its number, as a shell reports it."""
    if returncode >= 0:
        return returncode
    return 0 if -returncode in forwarded else 128 - returncode
