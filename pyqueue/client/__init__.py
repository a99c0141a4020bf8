"""The Python client: talks to a pyqueue server over gRPC; imports neither the server nor rocksdict."""

from pyqueue.client.aio import AsyncClient
from pyqueue.client.aio_take import AsyncTakeStream
from pyqueue.client.answers import JobError
from pyqueue.client.client import Client
from pyqueue.client.job import Job
from pyqueue.client.steering import UNSET, ChangeResult, FairKey, FairKeys, QueueInfo, Rejected, WorkerInfo
from pyqueue.client.take import TakeStream

__all__ = [
    "UNSET",
    "AsyncClient",
    "AsyncTakeStream",
    "ChangeResult",
    "Client",
    "FairKey",
    "FairKeys",
    "Job",
    "JobError",
    "QueueInfo",
    "Rejected",
    "TakeStream",
    "WorkerInfo",
]
