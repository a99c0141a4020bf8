"""Finding the app a worker runs from its `MODULE:APP` name (the CLI and the process pool's
children alike)."""

import importlib
import os
import sys

from pyqueue.children import package_root


def load_app(target: str) -> object:
    """The object `APP` of module `MODULE`; ValueError saying what is wrong otherwise. The current
    directory is importable first, as when running `python -m`."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise ValueError("give MODULE:APP, e.g. myproject.tasks:app")
    _make_importable(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import {module_name}: {exc}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ValueError(f"{module_name} has no {attr!r}") from None


def _make_importable(directory: str) -> None:
    """First on sys.path, unless it holds another `pyqueue` (a checkout): then just after the one
    this process runs, since the process pool's children take this sys.path and would import the
    checkout's unbuilt sources."""
    if directory in sys.path:
        return
    root = package_root()
    at = 0
    if os.path.isdir(os.path.join(directory, "pyqueue")) and os.path.realpath(directory) != root:
        at = next((i + 1 for i, p in enumerate(sys.path) if p and os.path.realpath(p) == root), len(sys.path))
    sys.path.insert(at, directory)
