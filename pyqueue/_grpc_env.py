"""The gRPC transport pyqueue asks for, chosen before grpc is first imported.

grpcio 1.80 switched its Python package to the EventEngine endpoints. On the machines pyqueue is
measured on they cost about a third more CPU per message, on both ends, than the endpoints grpcio
used before; a message on an open stream took 0.15-0.18 ms of server CPU instead of 0.11-0.12 ms,
and the round trip went from 4.2-4.9k to 2.9-3.3k a second (bench/grpc_floor.py, bench/README.md).
So for the grpcio versions where that was measured, pyqueue asks for the earlier endpoints through
grpc's own switch, GRPC_EXPERIMENTS. grpcio plans to remove that switch; a version outside the
measured range keeps its default.

The choice is made only while GRPC_EXPERIMENTS is unset (set it, even to "", to keep grpcio's
default or your own flags), and only if grpc is not imported yet: grpc reads the variable once, at
import. Subprocesses inherit it: the shards of `pyqueue serve`, the processes of `pyqueue worker`.

Likewise GRPC_VERBOSITY: while it is unset, pyqueue sets it to ERROR. grpcio since 1.68 prints
its core's INFO lines before its logging is set up, among them one "Got goaway" line per
connection whenever a server restarts or stops: noise in every worker's and script's stderr at
each deploy. Set it yourself (INFO, DEBUG) to see them.
"""

import os
import sys
from collections.abc import MutableMapping
from importlib import metadata

LEGACY_ENDPOINTS = "-event_engine_listener,-event_engine_client"
MEASURED = ((1, 80), (1, 85))  # the grpcio minor versions, first and last, this was measured on


def choose(environ: MutableMapping[str, str], grpc_imported: bool, grpcio_version: str | None) -> str | None:
    """The GRPC_EXPERIMENTS value to set, or None to leave things as they are."""
    if "GRPC_EXPERIMENTS" in environ or grpc_imported or grpcio_version is None:
        return None
    try:
        major, minor = (int(part) for part in grpcio_version.split(".")[:2])
    except ValueError:
        return None
    first, last = MEASURED
    return LEGACY_ENDPOINTS if first <= (major, minor) <= last else None


def apply() -> None:
    try:
        version: str | None = metadata.version("grpcio")
    except metadata.PackageNotFoundError:
        version = None
    value = choose(os.environ, "grpc" in sys.modules, version)
    if value is not None:
        os.environ["GRPC_EXPERIMENTS"] = value
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


apply()  # on import: pyqueue/__init__.py imports this module before anything imports grpc
