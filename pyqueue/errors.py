"""The exceptions pyqueue's client raises, and the one mapping from gRPC status codes to them."""

import grpc


class PyQueueError(Exception):
    """Base of every error the client raises."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN


class InvalidArgument(PyQueueError):
    """The request was malformed or broke a limit; the message says what to fix."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(PyQueueError):
    """No such job (it may have completed and been deleted)."""

    code = grpc.StatusCode.NOT_FOUND


class FailedPrecondition(PyQueueError):
    """The job is not in a state that allows this (e.g. an ack for a lease that is no longer current)."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class ResourceExhausted(PyQueueError):
    """A size limit was exceeded, or the server's disk is full."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class Unavailable(PyQueueError):
    """The server could not be reached, or went away."""

    code = grpc.StatusCode.UNAVAILABLE
    # True when the request surely did nothing: it never reached a server, or one refused it
    # before acting (client/failover.py sends such an enqueue again).
    unsent = False


# What gRPC and the server say when a call did nothing at all.
_UNSENT = ("failed to connect to all addresses", "Connection refused", "the server is shutting down")


class Unauthenticated(PyQueueError):
    """The server asks for a token (PYQUEUE_TOKEN), and none or an unknown one was sent."""

    code = grpc.StatusCode.UNAUTHENTICATED


class PermissionDenied(PyQueueError):
    """The token lacks the right for this call on that queue; the message names both."""

    code = grpc.StatusCode.PERMISSION_DENIED


class DataLoss(PyQueueError):
    """What the call needed is damaged in the server's store; the message names it and what to run."""

    code = grpc.StatusCode.DATA_LOSS


class JobFailed(Exception):
    """Raised by `result()` for a job that is dead: its last error is the message."""

    def __init__(self, job_id: int, message: str, error_type: str = "") -> None:
        super().__init__(f"job {job_id} is dead: {error_type + ': ' if error_type else ''}{message}")
        self.job_id = job_id
        self.error = message
        self.error_type = error_type


_BY_CODE: dict[grpc.StatusCode, type[PyQueueError]] = {
    cls.code: cls
    for cls in (
        InvalidArgument,
        NotFound,
        FailedPrecondition,
        ResourceExhausted,
        Unavailable,
        Unauthenticated,
        PermissionDenied,
        DataLoss,
    )
}
_BY_NAME = {code.name: cls for code, cls in _BY_CODE.items()}


def from_rpc_error(error: grpc.RpcError) -> PyQueueError:
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    details = error.details() if hasattr(error, "details") else str(error)
    cls = _BY_CODE.get(code, PyQueueError)
    exc = cls(details or code.name)
    exc.code = code
    if isinstance(exc, Unavailable):
        exc.unsent = any(text in (details or "") for text in _UNSENT)
    return exc


def from_code_name(name: str, message: str) -> PyQueueError:
    """For per-job refusals carried inside a stream message (Rejection.code)."""
    return _BY_NAME.get(name, PyQueueError)(message)


_BY_NUMBER = {code.value[0]: code for code in grpc.StatusCode}


def from_status(number: int, message: str) -> PyQueueError:
    """For a status the native transport read off the wire (grpc-status, grpc-message)."""
    code = _BY_NUMBER.get(number, grpc.StatusCode.UNKNOWN)
    exc = _BY_CODE.get(code, PyQueueError)(message or code.name)
    exc.code = code
    if isinstance(exc, Unavailable):
        exc.unsent = any(text in message for text in _UNSENT)
    return exc
