"""Engine errors. The engine knows no gRPC: the servicer maps these classes to status codes in
one place (pyqueue.server.status)."""


class EngineError(Exception):
    """Base of every refusal the engine answers with; the message says what to fix."""


class InvalidArgument(EngineError):
    pass


class NotFound(EngineError):
    pass


class FailedPrecondition(EngineError):
    pass


class ResourceExhausted(EngineError):
    pass


class Unavailable(EngineError):
    pass
