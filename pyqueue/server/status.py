"""Engine errors to gRPC status codes: the one place where that mapping lives."""

from typing import Any, NoReturn

import grpc
import grpc.aio

from pyqueue.engine import errors

Context = grpc.aio.ServicerContext[Any, Any]
EOF: object = grpc.aio.EOF  # type: ignore[attr-defined]  # missing from the stubs

_CODES: dict[type[errors.EngineError], grpc.StatusCode] = {
    errors.InvalidArgument: grpc.StatusCode.INVALID_ARGUMENT,
    errors.NotFound: grpc.StatusCode.NOT_FOUND,
    errors.FailedPrecondition: grpc.StatusCode.FAILED_PRECONDITION,
    errors.ResourceExhausted: grpc.StatusCode.RESOURCE_EXHAUSTED,
    errors.Unavailable: grpc.StatusCode.UNAVAILABLE,
}


def code_for(error: errors.EngineError) -> grpc.StatusCode:
    for cls in type(error).__mro__:
        if cls in _CODES:
            return _CODES[cls]
    return grpc.StatusCode.INTERNAL


async def abort(context: Context, error: errors.EngineError) -> NoReturn:
    await context.abort(code_for(error), str(error))
    raise AssertionError("unreachable: abort raises")
