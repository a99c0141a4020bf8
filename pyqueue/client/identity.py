"""Who a worker stream says it is (ListWorkers shows it): the host, the process id, and a name,
`PYQUEUE_WORKER_NAME` if set (`pyqueue worker` sets it to its app)."""

import os
import socket

from pyqueue.v1 import queue_pb2 as pb


def identity() -> pb.WorkerIdentity:
    return pb.WorkerIdentity(
        host=socket.gethostname(), pid=os.getpid(), name=os.environ.get("PYQUEUE_WORKER_NAME", "")
    )
