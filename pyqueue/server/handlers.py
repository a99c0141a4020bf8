"""The Queue service's method handlers, built from the protocol's descriptor instead of the
generated `add_QueueServicer_to_server`, for two reasons: requests arrive as bytes and are decoded
here, so an undecodable one is answered INVALID_ARGUMENT saying so (grpc's own decoding answers
UNKNOWN with a Python exception's text); and each decoded request passes the guard (tokens and
rights, rights.py) before any servicer code runs. Every call is counted while it is in hand, so a
stopping server knows when it has none left (shutdown.py)."""

from collections.abc import Callable
from typing import Any

import grpc
import grpc.aio
from google.protobuf.message import DecodeError

from pyqueue.engine.errors import EngineError
from pyqueue.server.auth import Principal
from pyqueue.server.read_share import READS, WORK, ReadShare
from pyqueue.server.rights import FORWARDED_FOR, RELAY, Guard, outcome_of
from pyqueue.server.shutdown import CallsInHand
from pyqueue.server.status import abort
from pyqueue.v1 import queue_pb2 as pb

SERVICE = pb.DESCRIPTOR.services_by_name["Queue"]
Context = grpc.aio.ServicerContext[Any, Any]


def add_queue_service(
    servicer: Any,
    server: grpc.aio.Server,
    guard: Guard | None = None,
    calls: CallsInHand | None = None,
    reads: ReadShare | None = None,
) -> None:
    """`reads`: how reads share the loop with writes (read_share.py); one is made if not given."""
    guard = guard or Guard(None)
    calls = calls or CallsInHand()
    reads = reads or ReadShare()
    handlers = {}
    for method in SERVICE.methods:
        decode = getattr(pb, method.input_type.name).FromString
        encode = getattr(pb, method.output_type.name).SerializeToString
        behavior = getattr(servicer, method.name)
        if method.client_streaming:
            handlers[method.name] = grpc.stream_stream_rpc_method_handler(
                _streaming(method.name, behavior, decode, guard, calls, reads),
                response_serializer=_passing_bytes(encode),
            )
        else:
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                _unary(method.name, behavior, decode, guard, calls, reads), response_serializer=encode
            )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE.full_name, handlers),))


def _passing_bytes(encode: Callable[[Any], bytes]) -> Callable[[Any], bytes]:
    """A stream's serializer: a message already encoded (a push built natively) goes as it is."""

    def serialize(message: Any) -> bytes:
        return message if message.__class__ is bytes else encode(message)

    return serialize


def _peer(context: Context) -> str:
    """The caller's address; for a call the router forwarded, the router's and the client's (as
    the router saw it: a client dialing a shard directly could claim any, so both are logged)."""
    forwarded = next((v for k, v in context.invocation_metadata() or () if k == FORWARDED_FOR), None)
    peer = context.peer()
    return f"{peer} for {forwarded!s}" if forwarded else peer


async def _principal(guard: Guard, context: Context) -> Principal | None:
    try:
        return guard.principal(context.invocation_metadata())
    except EngineError as exc:
        await abort(context, exc)


def _refusal(decode: Callable[[bytes], Any], exc: Exception) -> str:
    name = getattr(decode, "__self__", None)
    kind = name.__name__ if isinstance(name, type) else "message"
    return f"the request is not a valid {kind} ({exc})"


def _unary(
    name: str,
    behavior: Callable[..., Any],
    decode: Callable[[bytes], Any],
    guard: Guard,
    calls: CallsInHand,
    reads: ReadShare,
) -> Callable[..., Any]:
    watched = guard.watches(name)  # without tokens, only changes pass the guard (to be logged)
    is_read, is_write = name in READS, name in WORK

    async def counted(raw: bytes, context: Context) -> Any:
        calls.enter()
        try:
            if is_read:
                async with reads.read():
                    return await handle(raw, context)
            if is_write:
                reads.note_write()
            return await (relayed(raw, context) if name in RELAY else handle(raw, context))
        finally:
            calls.leave()

    async def relayed(raw: bytes, context: Context) -> Any:
        try:
            guard.check_relay(name, context.invocation_metadata())
        except EngineError as exc:
            await abort(context, exc)
        try:
            request = decode(raw)
        except DecodeError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, _refusal(decode, exc))
        return await behavior(request, context)

    async def handle(raw: bytes, context: Context) -> Any:
        who = await _principal(guard, context) if watched else None
        try:
            request = decode(raw)
        except DecodeError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, _refusal(decode, exc))
        if not watched:
            return await behavior(request, context)
        peer = _peer(context)
        try:
            guard.check(name, request, who, peer)
        except EngineError as exc:
            await abort(context, exc)
        if not guard.audited(name):
            response = await behavior(request, context)
        else:  # a change: logged with what became of it, done or refused
            try:
                response = await behavior(request, context)
            except BaseException:
                code = context.code() if hasattr(context, "code") else None
                why = f"refused {getattr(code, 'name', code)}: {context.details() if hasattr(context, 'details') else ''}"
                guard.record(name, request, who, peer, why)
                raise
            guard.record(name, request, who, peer, outcome_of(response))
        if response is not None:
            guard.cut(name, response, who)
        return response

    return counted


class _DecodingContext:
    """The servicer context of a stream, whose `read` decodes (and refuses what does not)."""

    def __init__(
        self, context: Context, decode: Callable[[bytes], Any], check: Callable[[Any], None], reads: ReadShare
    ) -> None:
        self._context = context
        self._decode = decode
        self._check = check
        self._reads = reads

    async def read(self) -> Any:
        raw = await self._context.read()
        if not isinstance(raw, bytes):
            return raw  # EOF
        self._reads.note_write()  # an enqueue, an ack, a subscribe: work coming in
        try:
            message = self._decode(raw)
        except DecodeError as exc:
            await self._context.abort(grpc.StatusCode.INVALID_ARGUMENT, _refusal(self._decode, exc))
        try:
            self._check(message)
        except EngineError as exc:
            await abort(self._context, exc)
        return message

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


def _streaming(
    name: str,
    behavior: Callable[..., Any],
    decode: Callable[[bytes], Any],
    guard: Guard,
    calls: CallsInHand,
    reads: ReadShare,
) -> Callable[..., Any]:
    async def counted(requests: Any, context: Context) -> None:
        calls.enter()
        try:
            await handle(requests, context)
        finally:
            calls.leave()

    async def handle(requests: Any, context: Context) -> None:
        who = await _principal(guard, context)
        peer = _peer(context)

        def check(message: Any) -> None:
            if who is None:
                return  # no tokens: nothing to check on a stream (it changes nothing to log)
            if name == "Take":
                if message.HasField("subscribe"):
                    guard.check_subscribe(message.subscribe, who)
            else:  # EnqueueStream: each message is an EnqueueRequest
                guard.check("Enqueue", message, who, peer)

        await behavior(requests, _DecodingContext(context, decode, check, reads))

    return counted
