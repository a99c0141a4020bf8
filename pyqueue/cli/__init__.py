"""The `pyqueue` command. Server commands import the server lazily, so client commands stay light."""

from pyqueue.cli.main import main

__all__ = ["main"]
