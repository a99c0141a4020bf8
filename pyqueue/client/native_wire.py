"""Single enqueues over the native transport (pyqueue._native's WireChannel, HTTP/2 in Rust):
the same contract as client/enqueue_stream.py's StreamedEnqueues, without grpcio's Python layer.

One EnqueueStream kept open per shard; each request crosses to Rust as its bytes and the GIL is
released until the answer's bytes come back, so a call costs the caller a serialisation, a parse
and one native round trip. Only what grpcio would do differently is handled here: a stream the
server ended unread is sent once on a new one, a server without EnqueueStream falls back to
unary calls, and a call that ends without an answer raises the client's usual errors.

A server with a native front (server/front.py) names its port in the main stream's first
headers; the next requests go there. A front that takes nothing (unreachable, stopping) sends
the request back to the main port at once: nothing was written.

The native transport speaks plaintext HTTP/2 to one address: a client with TLS, or given several
cluster nodes to choose from, keeps grpcio (`usable`).
"""

import os
import threading

from pyqueue.client.enqueue_stream import Unary
from pyqueue.errors import PyQueueError, Unavailable, from_code_name, from_status
from pyqueue.v1 import queue_pb2 as pb

try:
    from pyqueue._native import WireChannel, WireError, WireStream
except ImportError:  # an extension built before the transport existed
    WireChannel = None  # type: ignore[assignment,misc]

ENQUEUE_STREAM = "/pyqueue.v1.Queue/EnqueueStream"
FRONT_HEADER = "pyqueue-enqueue-port"  # as pyqueue.server.front's (the client imports no server)
MAX_MESSAGE = 64 << 20  # as the grpcio channel's own limits (client.CHANNEL_OPTIONS)
_UNIMPLEMENTED = 12
_UNAVAILABLE = 14


def usable(address: str, tls: bool) -> bool:
    """Whether single enqueues to `address` may go native: PYQUEUE_TRANSPORT=grpc keeps grpcio."""
    if os.environ.get("PYQUEUE_TRANSPORT", "native") == "grpc" or WireChannel is None or tls:
        return False
    return (
        bool(address) and "," not in address and not address.startswith(("ipv4:", "ipv6:", "dns:", "unix:"))
    )


class NativeEnqueues:
    def __init__(self, address: str, metadata: list[tuple[str, str]], unary: Unary, timeout: float) -> None:
        self._address = address
        self._metadata = metadata
        self._main = WireChannel(address, metadata, MAX_MESSAGE)
        self._channel = self._main
        self._unary = unary
        self._timeout = timeout
        self._lock = threading.Lock()
        self._stream: WireStream | None = None
        self._supported = True
        # The server's native front for enqueues (server/front.py), learnt from the main port's
        # first answer; a front that never answered is not tried again at the same address.
        self._front: str | None = None
        self._front_answered = False
        self._unreachable: str | None = None
        self._front_tried: str | None = None
        self._learning = False

    def send(self, jobs: list[pb.NewJob]) -> list[pb.Enqueued]:
        if not self._supported:
            return self._unary(jobs)
        request = pb.EnqueueRequest(jobs=jobs).SerializeToString()
        with self._lock:
            raw = self._exchange(request, again=True)
        if raw is None:  # the server has no EnqueueStream
            return self._unary(jobs)
        answer = pb.EnqueueResponse.FromString(raw)
        if answer.HasField("error"):
            raise from_code_name(answer.error.code, answer.error.message)
        return list(answer.jobs)

    def _exchange(self, request: bytes, again: bool) -> bytes | None:
        try:
            if self._stream is None:
                self._stream = self._channel.open_stream(ENQUEUE_STREAM)
                self._learning = self._front is None
            raw = self._stream.exchange(request, self._timeout)
        except WireError as exc:
            self._stream = None
            kind, code, message = exc.args
            # The front answers UNAVAILABLE only to what it never handed over (at its
            # connection bound, or stopping): as unsent as a connection never made.
            unread = kind in ("unsent", "ended") or (kind == "status" and code == _UNAVAILABLE)
            if self._front is not None and unread:
                # The front took nothing: nothing was written. Out of reach from here (it never
                # answered): the main port takes the request now. Gone or stopping (the server
                # restarts): unsent, so failover sends it again once the main port tells the
                # new front's port.
                reached = self._front_answered
                self._leave_front()
                if not reached:
                    self._unreachable = self._front_tried
                    return self._exchange(request, again)
                raise wire_error("unsent", 14, message, self._timeout) from None
            if self._front is not None and kind in ("broken", "deadline"):
                self._leave_front()  # the next request learns the front anew from the main port
            if kind == "ended" and again:
                # Ended without reading the request (the server was stopping, or restarted while
                # the stream sat idle): nothing was written, so a new stream carries it, once.
                return self._exchange(request, again=False)
            if kind == "status" and code == _UNIMPLEMENTED:
                self._supported = False
                return None
            raise wire_error(kind, code, message, self._timeout) from None
        if self._front is not None:
            self._front_answered = True
        elif self._learning:
            self._learn_front()
        return raw

    def _learn_front(self) -> None:
        self._learning = False
        assert self._stream is not None
        port = self._stream.header(FRONT_HEADER)
        if not port:
            return
        front = f"{self._address.rsplit(':', 1)[0]}:{port}"
        if front != self._unreachable:
            self._stream.close()
            self._stream = None
            self._front, self._front_answered = front, False
            self._channel = WireChannel(front, self._metadata, MAX_MESSAGE)

    def _leave_front(self) -> None:
        self._front_tried, self._front = self._front, None
        self._channel = self._main

    def close(self) -> None:
        with self._lock:
            if self._stream is not None:
                self._stream.close()
                self._stream = None


def wire_error(kind: str, code: int, message: str, timeout: float) -> PyQueueError:
    if kind == "deadline":
        return PyQueueError(f"no answer to an enqueue within {timeout}s")
    if kind in ("unsent", "broken", "ended"):
        exc = Unavailable(message)
        exc.unsent = kind == "unsent"
        return exc
    if code == 1:  # CANCELLED by the server: the stream broke (see enqueue_stream.py)
        return Unavailable(message)
    return from_status(code, message)
