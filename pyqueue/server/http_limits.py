"""What one client may cost the HTTP port, on any path: connections (each a thread and a
descriptor, from a share of its own so RocksDB keeps its files), how long it may sit silent or
trickle a body, how big a body may be, and how many jobs one may hold. Every bound has a flag."""

import codecs
import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from pyqueue.engine.errors import InvalidArgument, ResourceExhausted

CHUNK = 1 << 16


class Readable(Protocol):
    """A WSGI request's input (the socket's buffered reader)."""

    def read(self, size: int, /) -> bytes: ...


@dataclass(frozen=True)
class HttpLimits:
    max_connections: int = 64  # --max-http-connections: more are closed at once
    max_body_bytes: int = 16 << 20  # --max-http-body-bytes: refused before a byte is read
    read_timeout_s: float = 30.0  # --http-read-timeout: a silent connection, or a whole body
    max_jobs: int = 1000  # --max-jobs-per-enqueue: parsing stops past it
    # --max-workflow-jobs: reading a workflow's steps stops past it (a 10 MB chain of 700,000
    # steps took 8 s of CPU to convert before the server refused it)
    max_workflow_jobs: int = 10_000
    # A body refused (its size, its length, its job count) is answered this much later, on its
    # own thread (no CPU): a client that sends one after another, a thousand a second on
    # loopback, took most of a core in connections and threads; paced, each of its connections
    # sends 10 a second.
    refusal_pause_s: float = 0.1


def body_chunks(stream: "Readable", content_length: str | None, limits: HttpLimits) -> Iterator[bytes]:
    """The request body, a chunk at a time, as the parser asks for it: refused at once when its
    length is bad or over the limit, and while it is read when it does not arrive within the read
    timeout. A body refused part way (past the job limit) is never read further: the connection
    closes with the rest unread."""
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
    return _chunks(stream, length, limits.read_timeout_s)


def _chunks(stream: "Readable", length: int, timeout_s: float) -> Iterator[bytes]:
    late = f"the body did not arrive within {timeout_s:g}s (--http-read-timeout)"
    deadline = time.monotonic() + timeout_s
    left = length
    while left:
        try:
            chunk = stream.read(min(CHUNK, left))
        except OSError:  # the connection's read timeout: silent past --http-read-timeout
            raise InvalidArgument(late) from None
        if not chunk:
            raise InvalidArgument(f"the body ended after {length - left} of its {length} bytes")
        left -= len(chunk)
        if left and time.monotonic() > deadline:
            raise InvalidArgument(late)
        yield chunk


class _Text:
    """The body's text, read and decoded a chunk at a time as parsing needs it, with what is
    parsed dropped: a body refused past its job limit is read and decoded only that far, and no
    step holds the GIL long (decoding 16 MiB at once held it for 9 ms)."""

    STEP = 1 << 16  # a body given whole is cut into chunks this long

    def __init__(self, body: bytes | bytearray | Iterable[bytes]) -> None:
        if isinstance(body, bytes | bytearray):
            whole = body
            body = (bytes(whole[i : i + self.STEP]) for i in range(0, len(whole), self.STEP))
        self._chunks = iter(body)
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self.text = ""
        self.whole = False

    def more(self, at: int, at_least: int = 1) -> int:
        """Drop text[:at], then read and decode chunks until `at_least` more bytes came (or the
        body ended); returns where `at` now is (0). A value that spans many chunks asks for
        twice what it has each time, so it is parsed again a few times, not once per chunk."""
        chunks, got = [], 0
        while got < at_least:
            chunk = next(self._chunks, None)
            if chunk is None:
                self.whole = True
                break
            chunks.append(chunk)
            got += len(chunk)
        self.text = self.text[at:] + self._decoder.decode(b"".join(chunks), final=self.whole)
        return 0


def parse_jobs(body: bytes | bytearray | Iterable[bytes], max_jobs: int) -> Any:
    """The body's JSON: one job, or a list of them decoded one at a time and refused past
    `max_jobs` before the rest are (4.8M jobs in one body took the server to 5.9 GB)."""
    source = _Text(body)
    at = _skip_more(source, 0)
    if not source.text.startswith("[", at):
        source.more(0, at_least=1 << 62)  # one value: all of it, in one read
        return json.loads(source.text)  # UnicodeDecodeError is a ValueError: the caller's 400
    decoder = json.JSONDecoder()
    jobs: list[Any] = []
    at = _skip_more(source, at + 1)
    if source.text.startswith("]", at):
        if _skip_more(source, at + 1) < len(source.text):
            raise ValueError("extra data after the list of jobs")
        return jobs
    while True:
        job, at = _one(decoder, source, at)
        jobs.append(job)
        if len(jobs) > max_jobs:
            raise ResourceExhausted(
                f"more than {max_jobs} jobs in one call (--max-jobs-per-enqueue): split the batch"
            )
        at = _skip_more(source, at)
        if source.text.startswith("]", at):
            if _skip_more(source, at + 1) < len(source.text):
                raise ValueError("extra data after the list of jobs")
            return jobs
        if not source.text.startswith(",", at):
            raise ValueError(f"expected ',' or ']' after job {len(jobs) - 1} of the list")
        at = _skip_more(source, at + 1)


def _one(decoder: json.JSONDecoder, source: _Text, at: int) -> tuple[Any, int]:
    """The value at `at`; one that ends where the decoded text ends may be cut (a number, or an
    object cut in two), so it is taken only once more text follows it, or the body is whole."""
    while True:
        try:
            value, end = decoder.raw_decode(source.text, at)
        except json.JSONDecodeError:
            if source.whole:
                raise
            at = source.more(at, at_least=len(source.text) - at)
            continue
        if end < len(source.text) or source.whole:
            return value, end
        at = source.more(at, at_least=len(source.text) - at)


def _skip_more(source: _Text, at: int) -> int:
    """Past whitespace at `at`, decoding more when the text ends there; the position after it."""
    while True:
        at = _skip(source.text, at)
        if at < len(source.text) or source.whole:
            return at
        at = source.more(at)


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at
