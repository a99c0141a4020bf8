"""The small JSON files beside the shards' stores (cluster.json, topology.json), written so that a
power cut leaves either the old file or the new one, never an empty one: a temporary file,
fsynced, renamed over the old one, then the directory fsynced. A damaged one is reported by name
with what to do, never as a traceback."""

import json
import os
from pathlib import Path
from typing import Any


class MetadataError(Exception):
    """A metadata file is missing a field, empty or not JSON; the message says which and what to do."""


def write_json(path: Path, value: Any) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "w") as f:
        json.dump(value, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(temporary, path)
    directory = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def read_json(path: Path, fields: tuple[str, ...], remedy: str) -> dict[str, Any]:
    """The file's object, which must have `fields`; MetadataError naming the file and `remedy`."""
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise MetadataError(f"{path} is damaged ({exc or 'empty'}); {remedy}") from None
    missing = [f for f in fields if not isinstance(value, dict) or f not in value]
    if missing:
        raise MetadataError(f"{path} is damaged (no {', '.join(missing)}); {remedy}")
    return dict(value)
