"""Changelog entries: a batch's keys recorded as the engine writes them, split into parts that fit
one NATS message, applied by a standby only with the entry that closes them; a fence drops the
parts of a batch whose owner died before closing it. Real RocksDB stores, no NATS."""

from pathlib import Path

import pytest

from pyqueue.cluster import changelog
from pyqueue.cluster.changelog import applied_sequence
from pyqueue.cluster.replica import Replica
from pyqueue.store import RocksStore
from pyqueue.store.contract import Family


def recorded(store: RocksStore, puts: int) -> changelog.RecordingBatch:
    batch = changelog.RecordingBatch(store.batch())
    for i in range(puts):
        batch.put_data(b"J%04d" % i, b"v" * 50)
        batch.put_index(b"S%04d" % i, b"")
    batch.delete_index(b"S0000")
    batch.delete(Family.DATA, b"gone")
    return batch


def snapshot(store: RocksStore) -> list[tuple[bytes, bytes]]:
    return [*store.scan(Family.DATA, b"", b"\xff"), *store.scan(Family.INDEX, b"", b"\xff")]


def test_a_batch_applied_from_its_entries_leaves_the_same_keys_as_written(tmp_path: Path) -> None:
    owner, standby = RocksStore(tmp_path / "owner"), RocksStore(tmp_path / "standby")
    batch = recorded(owner, 100)
    entries = batch.entries(max_bytes=1000)
    assert len(entries) > 5 and all(len(e) <= 1000 for e in entries)
    assert [e[:1] for e in entries] == [changelog.PART] * (len(entries) - 1) + [changelog.BATCH]
    owner.write(batch.inner)
    replica = Replica(standby, link=None, shard=0)  # type: ignore[arg-type]
    for sequence, entry in enumerate(entries, start=1):
        replica.take(sequence, entry)
        if sequence < len(entries):
            assert snapshot(standby) == [], "a part was applied before its batch closed"
    assert [kv for kv in snapshot(standby) if not kv[0].startswith(b"M")] == snapshot(owner)
    assert applied_sequence(standby) == len(entries)


def test_a_fence_drops_the_parts_of_a_batch_cut_short(tmp_path: Path) -> None:
    standby = RocksStore(tmp_path / "standby")
    entries = recorded(standby, 100).entries(max_bytes=1000)
    replica = Replica(standby, link=None, shard=0)  # type: ignore[arg-type]
    replica.take(1, entries[0])
    replica.take(2, entries[1])
    replica.take(3, changelog.FENCE)  # the owner died mid-batch; its successor fenced the log
    closing = recorded(standby, 1).entries(max_bytes=1 << 20)
    replica.take(4, closing[0])
    keys = [k for k, _ in snapshot(standby) if not k.startswith(b"M")]
    assert keys == [b"J0000"], keys  # only the closing batch: its put, and its own delete of S0000
    assert applied_sequence(standby) == 4


def test_an_entry_pyqueue_did_not_write_is_refused(tmp_path: Path) -> None:
    replica = Replica(RocksStore(tmp_path / "s"), link=None, shard=0)  # type: ignore[arg-type]
    with pytest.raises(changelog.DamagedEntry):
        replica.take(1, b"X")
    with pytest.raises(changelog.DamagedEntry):
        list(changelog.decode(changelog.BATCH + b"\x00\x00\x00\x00\x09ab"))
