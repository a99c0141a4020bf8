"""The sync and async clients, and their Take streams, offer the same public names with the same
parameters, but for the differences listed here, each with its reason. A method added to one and
not the other fails this test until it is added to both or listed."""

import inspect
from typing import Any

from pyqueue.client.aio import AsyncClient
from pyqueue.client.aio_take import AsyncTakeStream
from pyqueue.client.client import Client
from pyqueue.client.take import TakeStream

# name -> why only one side has it (each call is written once, in client/calls.py; these are the
# transports' own)
ONLY_SYNC = {
    Client: {
        "enqueue_calls": "the sync client's many-threads batching statistics",
    },
    TakeStream: {},
}
ONLY_ASYNC: dict[type, dict[str, str]] = {
    AsyncClient: {},
    AsyncTakeStream: {
        "connected": "the worker's reconnect backoff (the worker is async)",
        "next_batch": "the worker's batched take (the worker is async)",
    },
}
# name -> why its parameters differ
DIFFERENT: dict[tuple[type, str], str] = {}


def _public(cls: type) -> dict[str, Any]:
    return {name: member for name, member in inspect.getmembers(cls) if not name.startswith("_")}


def _parameters(member: Any) -> list[str] | None:
    try:
        return list(inspect.signature(member).parameters)
    except (TypeError, ValueError):
        return None  # a property or an attribute: its name is what must match


def test_every_sync_and_async_pair_matches_but_for_what_is_listed() -> None:
    for sync, asyncio_ in ((Client, AsyncClient), (TakeStream, AsyncTakeStream)):
        ours, theirs = _public(sync), _public(asyncio_)
        assert set(ours) - set(theirs) == set(ONLY_SYNC[sync]), sync.__name__
        assert set(theirs) - set(ours) == set(ONLY_ASYNC[asyncio_]), asyncio_.__name__
        differ = {
            name for name in set(ours) & set(theirs) if _parameters(ours[name]) != _parameters(theirs[name])
        }
        assert differ == {name for cls, name in DIFFERENT if cls is sync}, sync.__name__


async def test_the_async_steering_calls_work(server: Any) -> None:
    async with AsyncClient(server.address) as client:
        job = await client.enqueue("t", {"n": 1}, queue="q", delay=3600)
        changed = await client.update_job(job.id, priority=7)
        assert changed.priority == 7
        assert [r for r in (await client.cancel(job.id)).changed] == [job.id]
        await client.set_cron([{"name": "beat", "schedule": "0 3 * * *", "job": {"type": "t"}}])
        assert (await client.pause_cron("beat")).paused
        assert not (await client.resume_cron("beat")).paused
        await client.delete_cron("beat")
        assert await client.cron_entries() == []
