"""The Python client: talks to a pyqueue server over gRPC; imports neither the server nor rocksdict."""

from pyqueue.client.client import Client, JobError
from pyqueue.client.job import Job
from pyqueue.client.take import TakeStream

__all__ = ["Client", "Job", "JobError", "TakeStream"]
