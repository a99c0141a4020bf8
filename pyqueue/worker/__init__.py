"""The worker process: runs an App's job functions on jobs taken from the server."""

from pyqueue.worker.runtime import Worker, WorkerConfig

__all__ = ["Worker", "WorkerConfig"]
