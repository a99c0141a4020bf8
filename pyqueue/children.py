"""How pyqueue starts another pyqueue process (a shard, a worker process, an embedded server): the
same interpreter running the same pyqueue package as this one, whatever the working directory.

`python -m pyqueue` puts the working directory first on sys.path, so a shard started from a
checkout imported the checkout's sources (which have no built extension) instead of the installed
package its parent runs: `make serve` in a fresh clone died with "shard 0 did not start". `-P`
(Python 3.11) leaves the working directory out, and the directory this package was imported from
goes first on the child's PYTHONPATH, unless the interpreter finds it by itself (site-packages).
"""

import os
import site
import sys
from pathlib import Path

import pyqueue


def package_root() -> str:
    """The directory holding the `pyqueue` package this process runs."""
    return str(Path(pyqueue.__file__).resolve().parent.parent)


def pyqueue_command(*args: str) -> list[str]:
    """`python -m pyqueue ARGS` for a child, with the working directory kept off its sys.path."""
    return [sys.executable, "-P", "-m", "pyqueue", *args]


def child_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) with this package's root on PYTHONPATH."""
    env = dict(os.environ if base is None else base)
    root = package_root()
    found_anyway = {str(Path(p).resolve()) for p in [*site.getsitepackages(), site.getusersitepackages()]}
    if root not in found_anyway:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    return env
