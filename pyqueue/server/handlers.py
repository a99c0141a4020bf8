"""The Queue service's method handlers, built from the protocol's descriptor instead of the
generated `add_QueueServicer_to_server`, for one reason: requests arrive as bytes and are decoded
here, so an undecodable one is answered INVALID_ARGUMENT saying so (grpc's own decoding answers
UNKNOWN with a Python exception's text)."""

from collections.abc import Callable
from typing import Any

import grpc
import grpc.aio
from google.protobuf.message import DecodeError

from pyqueue.v1 import queue_pb2 as pb

SERVICE = pb.DESCRIPTOR.services_by_name["Queue"]


def add_queue_service(servicer: Any, server: grpc.aio.Server) -> None:
    handlers = {}
    for method in SERVICE.methods:
        decode = getattr(pb, method.input_type.name).FromString
        encode = getattr(pb, method.output_type.name).SerializeToString
        behavior = getattr(servicer, method.name)
        if method.client_streaming:
            handlers[method.name] = grpc.stream_stream_rpc_method_handler(
                _streaming(behavior, decode), response_serializer=encode
            )
        else:
            handlers[method.name] = grpc.unary_unary_rpc_method_handler(
                _unary(behavior, decode), response_serializer=encode
            )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE.full_name, handlers),))


def _refusal(decode: Callable[[bytes], Any], exc: Exception) -> str:
    name = getattr(decode, "__self__", None)
    kind = name.__name__ if isinstance(name, type) else "message"
    return f"the request is not a valid {kind} ({exc})"


def _unary(behavior: Callable[..., Any], decode: Callable[[bytes], Any]) -> Callable[..., Any]:
    async def handle(raw: bytes, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        try:
            request = decode(raw)
        except DecodeError as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, _refusal(decode, exc))
        return await behavior(request, context)

    return handle


class _DecodingContext:
    """The servicer context of a stream, whose `read` decodes (and refuses what does not)."""

    def __init__(self, context: grpc.aio.ServicerContext[Any, Any], decode: Callable[[bytes], Any]) -> None:
        self._context = context
        self._decode = decode

    async def read(self) -> Any:
        raw = await self._context.read()
        if not isinstance(raw, bytes):
            return raw  # EOF
        try:
            return self._decode(raw)
        except DecodeError as exc:
            await self._context.abort(grpc.StatusCode.INVALID_ARGUMENT, _refusal(self._decode, exc))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)


def _streaming(behavior: Callable[..., Any], decode: Callable[[bytes], Any]) -> Callable[..., Any]:
    async def handle(requests: Any, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        await behavior(requests, _DecodingContext(context, decode))

    return handle
