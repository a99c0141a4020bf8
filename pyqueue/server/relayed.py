"""Another shard's outbox entries (engine/flows/outbox.py), checked as the public API checks a
request before ApplyInbox writes any of them. Only the server's relay can send them (its
secret, relay_secret.py), but an entry is still held to what the public API would have made:
a job as `Engine.new_job` makes it, for a queue of this shard; an event for a batch at home
here. A refusal is INVALID_ARGUMENT naming the entry, and nothing of the call is written."""

import json
from typing import Any

from pyqueue.cluster.topology import slot_of
from pyqueue.engine import Engine, ranges
from pyqueue.engine.errors import EngineError, InvalidArgument
from pyqueue.engine.flows import job_from_dict
from pyqueue.engine.flows.batches import STATES
from pyqueue.engine.ids import shard_of
from pyqueue.engine.model import NewJob
from pyqueue.engine.retry import JobOptions
from pyqueue.server.config import ServerConfig
from pyqueue.v1 import queue_pb2 as pb

_U64 = 1 << 64


def check_entries(engine: Engine, config: ServerConfig, entries: "list[pb.OutboxEntry]") -> None:
    last = 0
    for e in entries:
        if e.seq <= last:
            raise InvalidArgument(
                f"entry {e.seq} comes after entry {last}: entries go in increasing sequence"
            )
        last = e.seq
        try:
            _check(engine, config, e.entry)
        except (EngineError, ValueError, TypeError, KeyError, AttributeError) as exc:
            raise InvalidArgument(
                f"entry {e.seq} is not an outbox entry a shard of this server makes: {exc}"
            ) from None


def _check(engine: Engine, config: ServerConfig, raw: bytes) -> None:
    entry = json.loads(raw)
    if not isinstance(entry, dict):
        raise ValueError("not a JSON object")
    if entry.get("to") != config.shard_index:
        raise ValueError(f"it is for shard {entry.get('to')!r}, and this is shard {config.shard_index}")
    _whole("p", entry.get("p", 0))
    if entry.get("k") == "job":
        _check_job(engine, config, entry)
    elif entry.get("k") == "ev":
        _check_event(engine, config, entry)
    else:
        raise ValueError(f"its kind {entry.get('k')!r} is neither 'job' nor 'ev'")


def _check_job(engine: Engine, config: ServerConfig, entry: dict[str, Any]) -> None:
    job = entry["job"]
    if not isinstance(job, dict):
        raise ValueError("its job is not an object")
    given = job_from_dict(job)
    owner = slot_of(given.queue) % config.shard_count
    if owner != config.shard_index:
        raise ValueError(f"queue {given.queue!r} belongs to shard {owner}")
    if given.unique_key or given.fold_key:
        raise ValueError("a workflow's job has no unique key and no fold key")
    if given != _remade(engine, given):
        raise ValueError("its job differs from what the public API makes of the same fields")
    flow = entry["flow"]
    if not isinstance(flow, dict):
        raise ValueError("its flow is not an object")
    for name in ("w", "b", "i"):
        if name in flow or name == "w":
            _whole(name, flow[name])
    delay = _whole("d", entry.get("d", 0))
    if delay:
        ranges.check("delay_ms", delay)


def _remade(engine: Engine, given: NewJob) -> NewJob:
    """The job the public API makes of `given`'s fields (every range and limit checked again)."""
    options = JobOptions.decode(given.options)
    if options.cancelled or options.flow is not None or options.fold is not None:
        raise ValueError("its options hold what only the server sets (cancelled, flow, fold)")
    return engine.new_job(
        0,
        given.type,
        given.queue,
        given.priority,
        given.payload,
        given.content_type,
        run_at_ms=given.run_at_ms,
        max_retries=None if given.max_retries == -1 else given.max_retries,
        timeout_ms=given.timeout_ms,
        backoff=options.backoff,
        keep_completed_ms=options.keep_completed_ms,
        headers=options.headers,
        keep_result_ms=options.keep_result_ms,
        limit_key=given.limit_key,
        fair_key=given.fair_key,
    )


def _check_event(engine: Engine, config: ServerConfig, entry: dict[str, Any]) -> None:
    batch = _whole("b", entry["b"])
    if shard_of(batch) != config.shard_index:
        raise ValueError(f"batch {batch} is at home on shard {shard_of(batch)}")
    _whole("i", entry["i"])
    _whole("j", entry["j"])
    if entry["s"] not in STATES:
        raise ValueError(f"state {entry['s']!r} is not one of {', '.join(STATES)}")
    result = entry.get("r")
    if result is not None and (
        not isinstance(result, str) or len(result.encode()) > engine.flows.max_input_bytes
    ):
        raise ValueError(f"its result is not text of at most {engine.flows.max_input_bytes} bytes")


def _whole(name: str, value: Any) -> int:
    if type(value) is not int or not 0 <= value < _U64:
        raise ValueError(f"{name} {value!r} is not a whole number below 2^64")
    return value
