"""Failpoints: named places where a test can hold the server still, by signal rather than by sleep.

With PYQUEUE_FAILPOINT_<NAME>=<path to a FIFO>, the server blocks at that point until the test
opens the FIFO for writing. Unset (always, outside tests) a failpoint costs one dict lookup.
"""

import os


def wait(name: str) -> None:
    path = os.environ.get(f"PYQUEUE_FAILPOINT_{name.upper()}")
    if path:
        with open(path, "rb"):  # blocks until the test opens the other end
            pass
