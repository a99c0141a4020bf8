"""The writes, one class each: read, check, write (in the single writer), then complete (on the loop).

`apply` runs in the writer thread against a BatchView and must refuse (raise) before it writes
anything. `complete` runs where callers wait, after the commit (and its fsync where `needs_sync`):
it updates the in-memory hints, then answers. Memory effects run even when the caller has gone
away: memory must follow the disk.

Every transition out of a state re-reads the record and checks it is still in that state (and,
for jobs in flight, still under the same lease): that check is the compare-and-swap that makes the
in-memory sets mere hints.
"""

from pyqueue.engine.requests.base import Request, Transitions, check_lease, write_error
from pyqueue.engine.requests.cron import ChangeCron, CronTick, SetCron
from pyqueue.engine.requests.handback import HandBack
from pyqueue.engine.requests.producers import Enqueue
from pyqueue.engine.requests.steering import (
    CancelJobs,
    DeleteJobs,
    PauseQueue,
    RetryJobs,
    SetFairWeights,
    SetQueueLimit,
    UpdateJobs,
)
from pyqueue.engine.requests.timed import OpenSnapshot, Promote, Purge, Timeout
from pyqueue.engine.requests.workers import Ack, Claim, Fail, Holder, SetDeadlines

__all__ = [
    "Ack",
    "CancelJobs",
    "ChangeCron",
    "Claim",
    "CronTick",
    "DeleteJobs",
    "Enqueue",
    "Fail",
    "HandBack",
    "Holder",
    "OpenSnapshot",
    "PauseQueue",
    "Promote",
    "Purge",
    "Request",
    "RetryJobs",
    "SetCron",
    "SetDeadlines",
    "SetFairWeights",
    "SetQueueLimit",
    "Timeout",
    "Transitions",
    "UpdateJobs",
    "check_lease",
    "write_error",
]
