"""Logging for `pyqueue serve` and `pyqueue worker`: a level from a fixed list, and plain lines or
one JSON object per line (`--log-format json`) for log shippers."""

import json
import logging
from collections.abc import Callable
from typing import Any

import click

LEVELS = ("debug", "info", "warning", "error", "critical")
FORMATS = ("text", "json")
_TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def log_options(command: Callable[..., Any]) -> Callable[..., Any]:
    command = click.option(
        "--log-format",
        type=click.Choice(FORMATS),
        default="text",
        show_default=True,
        help="json: one object per line.",
    )(command)
    return click.option(
        "--log-level", type=click.Choice(LEVELS, case_sensitive=False), default="info", show_default=True
    )(command)


def setup_logging(level: str, fmt: str) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(_TEXT))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)
