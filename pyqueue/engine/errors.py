"""Engine errors. The engine knows no gRPC: the servicer maps these classes to status codes in
one place (pyqueue.server.status)."""


class EngineError(Exception):
    """Base of every refusal the engine answers with; the message says what to fix. `code` is
    the gRPC status name it is answered with (pyqueue.server.status maps it)."""

    code = "INTERNAL"


class InvalidArgument(EngineError):
    code = "INVALID_ARGUMENT"


class NotFound(EngineError):
    code = "NOT_FOUND"


class FailedPrecondition(EngineError):
    code = "FAILED_PRECONDITION"


class ResourceExhausted(EngineError):
    code = "RESOURCE_EXHAUSTED"


class Unavailable(EngineError):
    code = "UNAVAILABLE"


class Internal(EngineError):
    """The server failed at a request (a bug, or a damaged block read): that request fails, the
    server goes on."""


class DataLoss(EngineError):
    """What the request needs is damaged in the store: the message names it and what to run."""

    code = "DATA_LOSS"
