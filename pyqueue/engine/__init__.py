"""The engine: enqueue, claim, ack, fail, scheduling and recovery over the store and the native
hints. It knows no transport; see engine.Engine for the facade."""

from pyqueue.engine.config import EngineConfig
from pyqueue.engine.engine import Engine
from pyqueue.engine.errors import (
    EngineError,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    ResourceExhausted,
)
from pyqueue.engine.limits import Limits
from pyqueue.engine.model import Failure, JobView, NewJob, Outcome, Rejection
from pyqueue.store.records import Status  # a job's status, as the engine's callers name it

__all__ = [
    "Engine",
    "EngineConfig",
    "EngineError",
    "FailedPrecondition",
    "Failure",
    "InvalidArgument",
    "JobView",
    "Limits",
    "NewJob",
    "NotFound",
    "Outcome",
    "Rejection",
    "ResourceExhausted",
    "Status",
]
