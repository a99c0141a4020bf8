"""The native front: Enqueue and EnqueueStream served on a port of their own by the native crate
(native/src/wire/front.rs), without grpcio's Python layer.

grpc.aio costs a shard about 0.17 ms of CPU per call before any of pyqueue runs (bench/README.md,
the floor): as much as the engine's own work on a single enqueue. Here HTTP/2 and gRPC's framing
are Rust's; the requests of every connection wait in one queue, and this event loop takes them
all at once when the front's socket turns readable: one Python call per batch. Each request is
then checked and written exactly as on the main port (the same guard, the same
`QueueService.enqueue`, so the same statuses and messages), and its answer's bytes go back.

How clients find it: the main port's EnqueueStream sends the front's port in its first headers
(FRONT_HEADER); the native client (client/native_wire.py) moves there and falls back to the main
port if it cannot reach it. grpcio clients, grpcurl and other languages never see it.

Not started with TLS (the front speaks plaintext only) or in a cluster; `--enqueue-port` fixes
its port (for a firewall), `--no-native-front` turns it off.
"""

import asyncio
import functools
import logging
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from pyqueue.engine.errors import EngineError
from pyqueue.server.config import ServerConfig
from pyqueue.server.convert import enqueue_refusal, enqueue_response
from pyqueue.server.read_share import ReadShare
from pyqueue.server.rights import Guard
from pyqueue.server.shutdown import CallsInHand
from pyqueue.server.status import code_for, status_of
from pyqueue.v1 import queue_pb2 as pb

try:
    from pyqueue._native import WireFront
except ImportError:  # an extension built before the front existed
    WireFront = None  # type: ignore[assignment,misc]

log = logging.getLogger("pyqueue.server")

FRONT_HEADER = "pyqueue-enqueue-port"


class EnqueueFront:
    """The front of one server process; `start` listens, `close` and `stop` end it."""

    def __init__(
        self,
        service: Any,
        guard: Guard,
        calls: CallsInHand,
        reads: ReadShare,
        config: ServerConfig,
    ) -> None:
        """`service`: the QueueService whose `begin_enqueue` checks and writes (typed loosely:
        it imports this module)."""
        self._service = service
        self._guard = guard
        self._calls = calls
        self._reads = reads
        self._config = config
        self._wire: Any = None
        self._watches = guard.watches("Enqueue")
        self.requests = 0  # taken so far (/metrics: pyqueue_native_front_requests_total)

    @staticmethod
    def available() -> bool:
        return WireFront is not None

    def start(self, host: str, port: int) -> int:
        """Listen on host:port (0: any free port) and serve from this loop; the port."""
        config = self._config
        # Pings as the main port's (ServerConfig.grpc_options): a vanished client host is let go.
        ping_every_s = config.worker_timeout_s / 3
        self._wire = WireFront(
            f"{host}:{port}",
            config.max_message_bytes,
            config.max_connections,
            ping_every_s,
            config.worker_timeout_s - ping_every_s,
        )
        asyncio.get_running_loop().add_reader(self._wire.fileno(), self._take)
        return int(self._wire.port)

    def close(self) -> None:
        """Take no more requests; those handed over already are answered (see WireFront.close):
        the loop keeps watching until `stop`, for any handed over as the close came."""
        if self._wire is not None:
            self._wire.close()
            self._take()

    async def stop(self) -> None:
        """Once closed and the server's calls are done: stop watching, answer the last ones."""
        if self._wire is None:
            return
        asyncio.get_running_loop().remove_reader(self._wire.fileno())
        self._take()
        await self._calls.finished()

    def _take(self) -> None:
        """Every request waiting: checked, and its write handed to the writer, all in this turn
        of the loop, so that the writer commits them together; each answered once durable."""
        taken = self._wire.drain()
        self.requests += len(taken)
        for call, seq, streaming, authorization, peer, raw in taken:
            self._reads.note_write()
            request = self._admit(call, authorization, peer, raw)
            if request is None:
                continue
            try:
                written = self._service.begin_enqueue(request)
            except Exception as exc:
                self._refuse(call, seq, streaming, exc)
                continue
            if written is None:  # validate_only: checked, nothing to write
                self._wire.answer(call, seq, b"")
                continue
            self._calls.enter()
            written.add_done_callback(functools.partial(self._written, call, seq, streaming))

    def _written(self, call: int, seq: int, streaming: bool, written: "asyncio.Future[Any]") -> None:
        self._calls.leave()
        if written.cancelled():  # nothing cancels a write today; if it did, it may be written
            self._end(call, grpc.StatusCode.CANCELLED, "the write was cancelled: it may or may not be done")
        elif (error := written.exception()) is not None:
            self._refuse(call, seq, streaming, error)
        else:
            self._wire.answer(call, seq, enqueue_response(written.result()).SerializeToString())

    def _refuse(self, call: int, seq: int, streaming: bool, exc: BaseException) -> None:
        """A refusal by the engine is in-band on a stream (it goes on) and ends a unary call;
        anything else ends the call as the main port's `answered` would."""
        if isinstance(exc, EngineError) and streaming:
            self._wire.answer(call, seq, enqueue_refusal(code_for(exc), str(exc)).SerializeToString())
        elif isinstance(exc, Exception):
            self._end(call, *status_of("Enqueue", exc))
        else:
            self._end(call, grpc.StatusCode.INTERNAL, "Enqueue failed inside the server")

    def _admit(self, call: int, authorization: str | None, peer: str, raw: bytes) -> pb.EnqueueRequest | None:
        """The request, decoded and let through by the guard, as the main port's handlers.py does
        (a refusal there ends the call, on a stream too); None once refused."""
        try:
            who = self._guard.principal([("authorization", authorization)] if authorization else [])
            request = pb.EnqueueRequest.FromString(raw)
            if self._watches:
                self._guard.check("Enqueue", request, who, peer)
        except DecodeError as exc:
            self._end(
                call, grpc.StatusCode.INVALID_ARGUMENT, f"the request is not a valid EnqueueRequest ({exc})"
            )
            return None
        except EngineError as exc:
            self._end(call, code_for(exc), str(exc))
            return None
        return request

    def _end(self, call: int, code: grpc.StatusCode, message: str) -> None:
        self._wire.end(call, code.value[0], message)
