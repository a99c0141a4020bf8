"""Workflows kept by the server: chains, groups (batches) with callbacks, and their bookkeeping.

A workflow is a tree of steps (`plan.py`): a step is one job or a group of jobs, and may name the
step that runs after it has completed. Jobs carry their place in it in their options
(`JobOptions.flow`: the workflow, their batch and index, the step after them, their input).

Exactly once, across crashes and shards:
- a batch lives on one shard, its home (the shard that opened it: its id carries it); its jobs live
  on the shards of their queues;
- when one of its jobs ends (completed, dead, cancelled, deleted) or is revived (retried), the
  event is written in the same write as the job's own change (`membership.py`): applied to the
  batch at once when the batch is on this shard, else put in this shard's outbox (`outbox.py`);
- the server's relay (`pyqueue/server/relay.py`) carries outbox entries, once durable, to their
  shard, which applies them in order and keeps the last sequence applied from each shard in the
  same write, so an entry carried twice is applied once;
- the batch counts each job by its state (`batches.py`), so an event applied twice, or a job
  that ran twice, changes no count; callbacks fire when no job is pending, each at most once.
"""

from pyqueue.engine.flows.context import Flows
from pyqueue.engine.flows.plan import GroupStep, JobStep, Step, check_plan, job_from_dict, job_to_dict

__all__ = ["Flows", "GroupStep", "JobStep", "Step", "check_plan", "job_from_dict", "job_to_dict"]
