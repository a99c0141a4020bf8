"""Finding the app a worker runs from its `MODULE:APP` name (the CLI and the process pool's
children alike)."""

import importlib
import os
import sys


def load_app(target: str) -> object:
    """The object `APP` of module `MODULE`; ValueError saying what is wrong otherwise. The current
    directory is importable, as when running `python -m`."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:
        raise ValueError("give MODULE:APP, e.g. myproject.tasks:app")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import {module_name}: {exc}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ValueError(f"{module_name} has no {attr!r}") from None
