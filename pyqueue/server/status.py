"""Engine errors to gRPC status codes: the one place where that mapping lives."""

from typing import NoReturn

import grpc
import grpc.aio

from pyqueue.engine import errors

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


async def abort(context: grpc.aio.ServicerContext, error: errors.EngineError) -> NoReturn:
    await context.abort(code_for(error), str(error))
    raise AssertionError("unreachable: abort raises")
