"""What one client may cost the HTTP port, on any path: connections (each a thread and a
descriptor, from a share of its own so RocksDB keeps its files), how long it may sit silent or
trickle a body, how big a body may be, and how many jobs one may hold. Every bound has a flag."""

import json
import time
from dataclasses import dataclass
from typing import Any, BinaryIO

from pyqueue.engine.errors import InvalidArgument, ResourceExhausted

CHUNK = 1 << 16


@dataclass(frozen=True)
class HttpLimits:
    max_connections: int = 64  # --max-http-connections: more are closed at once
    max_body_bytes: int = 16 << 20  # --max-http-body-bytes: refused before a byte is read
    read_timeout_s: float = 30.0  # --http-read-timeout: a silent connection, or a whole body
    max_jobs: int = 1000  # --max-jobs-per-enqueue: parsing stops past it


def read_body(stream: BinaryIO, content_length: str | None, limits: HttpLimits) -> bytes:
    """The request body, refused before it is read when its length is missing-but-claimed, bad or
    over the limit, and refused when it does not arrive whole within the read timeout."""
    try:
        length = int(content_length or 0)
    except ValueError:
        raise InvalidArgument("Content-Length is not a number") from None
    if length < 0:
        raise InvalidArgument(f"Content-Length {length} is negative")
    if length > limits.max_body_bytes:
        raise ResourceExhausted(
            f"the body is {length} bytes; the limit is {limits.max_body_bytes} (--max-http-body-bytes)"
        )
    deadline = time.monotonic() + limits.read_timeout_s
    parts, left = [], length
    while left:
        try:
            chunk = stream.read(min(CHUNK, left))
        except OSError:  # the connection's read timeout: silent past --http-read-timeout
            raise InvalidArgument(
                f"the body did not arrive within {limits.read_timeout_s:g}s (--http-read-timeout)"
            ) from None
        if not chunk:
            raise InvalidArgument(f"the body ended after {length - left} of its {length} bytes")
        parts.append(chunk)
        left -= len(chunk)
        if left and time.monotonic() > deadline:
            raise InvalidArgument(
                f"the body did not arrive within {limits.read_timeout_s:g}s (--http-read-timeout)"
            )
    return b"".join(parts)


def parse_jobs(body: bytes, max_jobs: int) -> Any:
    """The body's JSON: one job, or a list of them decoded one at a time and refused past
    `max_jobs` before the rest are (4.8M jobs in one body took the server to 5.9 GB)."""
    text = body.decode()  # UnicodeDecodeError is a ValueError: the caller's 400
    start = len(text) - len(text.lstrip())
    if not text.startswith("[", start):
        return json.loads(text)
    decoder = json.JSONDecoder()
    jobs: list[Any] = []
    at = _skip(text, start + 1)
    if text.startswith("]", at):
        return jobs if not text[_skip(text, at + 1) :] else json.loads(text)
    while True:
        job, at = decoder.raw_decode(text, at)
        jobs.append(job)
        if len(jobs) > max_jobs:
            raise ResourceExhausted(
                f"more than {max_jobs} jobs in one call (--max-jobs-per-enqueue): split the batch"
            )
        at = _skip(text, at)
        if text.startswith("]", at):
            if text[_skip(text, at + 1) :]:
                raise ValueError("extra data after the list of jobs")
            return jobs
        if not text.startswith(",", at):
            raise ValueError(f"expected ',' or ']' at character {at}")
        at = _skip(text, at + 1)


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at
