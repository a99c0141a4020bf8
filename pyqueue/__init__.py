"""pyqueue: a durable job queue for Python teams.

The public API is what `__all__` lists. `pyqueue._native` is the private Rust extension that the
server uses; it is re-exported here only as `native` for tooling and benchmarks.
"""

# First, before anything imports grpc (it reads its settings once, at import): see _grpc_env.py.
from pyqueue import _grpc_env  # noqa: F401
from pyqueue import _native as native
from pyqueue.app import App, JobFunction, Kill, Retry, UnimportableJobWarning
from pyqueue.client import AsyncClient, ChangeResult, Client, Job, JobError, QueueInfo, TakeStream, WorkerInfo
from pyqueue.client.workflows import Batch, BatchInfo, Chain, Group, Task, WorkflowRun
from pyqueue.context import CurrentJob, current_job
from pyqueue.errors import (
    DataLoss,
    FailedPrecondition,
    InvalidArgument,
    JobFailed,
    NotFound,
    PermissionDenied,
    PyQueueError,
    ResourceExhausted,
    Unauthenticated,
    Unavailable,
)

__version__ = "0.1.0"

__all__ = [
    "App",
    "AsyncClient",
    "Batch",
    "BatchInfo",
    "Chain",
    "ChangeResult",
    "Client",
    "CurrentJob",
    "DataLoss",
    "FailedPrecondition",
    "Group",
    "InvalidArgument",
    "Job",
    "JobError",
    "JobFailed",
    "JobFunction",
    "Kill",
    "NotFound",
    "PermissionDenied",
    "PyQueueError",
    "QueueInfo",
    "ResourceExhausted",
    "Retry",
    "TakeStream",
    "Task",
    "Unauthenticated",
    "Unavailable",
    "UnimportableJobWarning",
    "WorkerInfo",
    "WorkflowRun",
    "__version__",
    "current_job",
    "native",
]
