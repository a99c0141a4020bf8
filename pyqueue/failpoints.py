"""Failpoints: named places where a test can hold the server still or make it fail, by signal
rather than by sleep. Read once from the environment; unset (always, outside tests) they cost a
dict lookup.

- PYQUEUE_FAILPOINT_<NAME>=<FIFO path> with `wait(name)`: block until the test opens the FIFO.
- PYQUEUE_FAILPOINT_<NAME>=<path> with `fail(name)`: raise OSError once that path exists;
  with `fail(name, key)`, only if the file is empty or one of its lines is `key` (a job id, say).
- The same with `crash(name, key)`: the process kills itself (SIGKILL), as a native crash would.
"""

import os
import signal

_PREFIX = "PYQUEUE_FAILPOINT_"
_PATHS = {k[len(_PREFIX) :].lower(): v for k, v in os.environ.items() if k.startswith(_PREFIX)}


def wait(name: str) -> None:
    path = _PATHS.get(name)
    if path:
        with open(path, "rb"):  # blocks until the test opens the other end
            pass


def fail(name: str, key: str = "") -> None:
    if _armed(name, key):
        raise OSError(f"failpoint {name}: injected failure")


def crash(name: str, key: str = "") -> None:
    if _armed(name, key):
        os.kill(os.getpid(), signal.SIGKILL)


def _armed(name: str, key: str) -> bool:
    path = _PATHS.get(name)
    if not path or not os.path.exists(path):
        return False
    with open(path) as file:
        keys = file.read().split()
    return not key or not keys or key in keys
