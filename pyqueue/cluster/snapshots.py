"""Snapshots, so that the changelog does not grow forever: an owner copies its store (a RocksDB
checkpoint, consistent while it writes) into the cluster's JetStream object store once its
changelog holds `snapshot_bytes`, then trims the changelog below what every live standby has
applied (and never past the snapshot). A node whose place in the changelog was trimmed away (a new
node, one that was down long) restores the snapshot, then applies the changelog after it.

The snapshot's changelog sequence is the APPLIED sequence inside the checkpoint (replica.py): a
BATCH or FENCE entry, so no batch's parts straddle it.
"""

import asyncio
import contextlib
import json
import logging
import shutil
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from pyqueue.cluster.changelog import applied_sequence
from pyqueue.cluster.nats_link import NatsLink
from pyqueue.store.rocks import RocksStore

log = logging.getLogger("pyqueue.cluster")
CHECK_S = 5.0  # how often an owner looks at its changelog's size
LIVE_S = 10.0  # a standby that reported within this is waited for before trimming


def object_name(shard: int) -> str:
    return f"shard-{shard}"


async def _bucket(link: NatsLink) -> Any:
    from nats.js.api import ObjectStoreConfig
    from nats.js.errors import BucketNotFoundError

    name = f"{link.config.bucket}_snapshots"
    try:
        return await link.js.object_store(name)
    except BucketNotFoundError:
        return await link.js.create_object_store(
            name, ObjectStoreConfig(bucket=name, replicas=link.config.replicas)
        )


def _pack(store: RocksStore, work: Path) -> tuple[Path, int]:
    """A checkpoint of `store`, as one tar file; (the file, the changelog sequence it holds)."""
    copy = work / "checkpoint"
    store.checkpoint(copy)
    opened = RocksStore(copy, read_only=True)
    try:
        sequence = applied_sequence(opened)
    finally:
        opened.close()
    packed = work / "snapshot.tar"
    with tarfile.open(packed, "w") as tar:
        tar.add(copy, arcname=".")
    shutil.rmtree(copy)
    return packed, sequence


class Snapshotter:
    """The owner's side; `run_once` is one look, which tests drive."""

    def __init__(self, link: NatsLink, shard: int, store: RocksStore, snapshot_bytes: int) -> None:
        self.link = link
        self.shard = shard
        self.store = store
        self.snapshot_bytes = snapshot_bytes
        self.taken = 0
        self._stopped = False
        self._busy: asyncio.Lock | None = None  # held through a snapshot: the store must stay open

    async def run(self) -> None:
        self._busy = asyncio.Lock()
        while not self._stopped:
            await asyncio.sleep(CHECK_S)
            async with self._busy:
                if self._stopped:
                    return
                try:
                    await self.run_once()
                except Exception as exc:  # the next look tries again; the changelog grows meanwhile
                    log.warning("shard %d: a snapshot failed: %s: %s", self.shard, type(exc).__name__, exc)

    async def stop(self) -> None:
        """Stop looking; wait for a snapshot under way (the store closes next)."""
        self._stopped = True
        if self._busy is not None:
            async with self._busy:
                pass

    async def run_once(self, force: bool = False) -> int | None:
        """Snapshot and trim if the changelog holds enough; the snapshot's sequence, or None."""
        stream = self.link.config.stream(self.shard)
        info = await self.link.js.stream_info(stream)
        if not force and int(info.state.bytes) < self.snapshot_bytes:
            return None
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(dir=self.store.path.parent) as tmp:
            packed, sequence = await asyncio.to_thread(_pack, self.store, Path(tmp))
            from nats.js.api import ObjectMeta

            bucket = await _bucket(self.link)
            with open(packed, "rb") as data:
                meta = ObjectMeta(
                    name=object_name(self.shard), description=json.dumps({"sequence": sequence})
                )
                await bucket.put(object_name(self.shard), data, meta=meta)
            size = packed.stat().st_size
        keep_from = min([sequence, *await self._standbys_applied()]) + 1
        await self.link.js.purge_stream(stream, seq=keep_from)
        self.taken += 1
        log.info(
            "shard %d: snapshot at changelog entry %d (%.1f MB in %.2fs); changelog trimmed below %d",
            self.shard, sequence, size / 1e6, time.perf_counter() - started, keep_from,
        )  # fmt: skip
        return sequence

    async def _standbys_applied(self) -> list[int]:
        """What each standby that reported lately has applied (replica.N.NODE keys)."""
        from nats.js.errors import KeyNotFoundError, NoKeysError

        try:
            keys = [k for k in await self.link.kv.keys() if k.startswith(f"replica.{self.shard}.")]
        except NoKeysError:
            return []
        applied = []
        for key in keys:
            if key.endswith(f".{self.link.config.node}"):
                continue
            with contextlib.suppress(KeyNotFoundError):
                value = json.loads((await self.link.kv.get(key)).value or b"{}")
                if time.time() - float(value.get("at", 0)) < LIVE_S:
                    applied.append(int(value.get("applied", 0)))
        return applied


async def restore(link: NatsLink, shard: int, data_dir: Path) -> int:
    """Replace the store in `data_dir` (closed) with the shard's snapshot; its sequence."""
    bucket = await _bucket(link)
    info = await bucket.get_info(object_name(shard))
    sequence = int(json.loads(info.description or "{}")["sequence"])
    with tempfile.TemporaryDirectory(dir=data_dir.parent) as tmp:
        packed = Path(tmp) / "snapshot.tar"
        with open(packed, "wb") as out:
            await bucket.get(object_name(shard), writeinto=out)
        await asyncio.to_thread(_unpack, packed, data_dir, Path(tmp) / "old")
    log.info("shard %d: restored the snapshot at changelog entry %d", shard, sequence)
    return sequence


def _unpack(packed: Path, data_dir: Path, old: Path) -> None:
    if data_dir.exists():
        data_dir.rename(old)  # removed with the temporary dir, once the new one is in place
    with tarfile.open(packed) as tar:
        for member in tar.getmembers():  # our own checkpoint: plain files in one directory
            name = Path(member.name)
            if name.is_absolute() or ".." in name.parts or not (member.isfile() or member.isdir()):
                raise ValueError(f"the snapshot holds {member.name!r}, which a checkpoint never does")
        tar.extractall(data_dir)
