"""The store contract, checked against every implementation (today: RocksStore)."""

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pyqueue.store import Family, RocksStore, Store

IMPLEMENTATIONS: dict[str, Callable[[Path], Store]] = {"rocks": RocksStore}


@pytest.fixture(params=sorted(IMPLEMENTATIONS))
def store(request, tmp_path: Path) -> Iterator[Store]:  # type: ignore[no-untyped-def]
    s = IMPLEMENTATIONS[request.param](tmp_path / "db")
    yield s
    s.close()


def write(store: Store, *ops: tuple[str, Family, bytes, bytes | None]) -> None:
    batch = store.batch()
    for op, family, key, value in ops:
        if op == "put":
            assert value is not None
            batch.put(family, key, value)
        else:
            batch.delete(family, key)
    store.write(batch)


def test_put_get_delete(store: Store) -> None:
    write(store, ("put", Family.DATA, b"a", b"1"), ("put", Family.INDEX, b"a", b"2"))
    assert store.get(Family.DATA, b"a") == b"1"
    assert store.get(Family.INDEX, b"a") == b"2"
    write(store, ("delete", Family.DATA, b"a", None))
    assert store.get(Family.DATA, b"a") is None
    assert store.get(Family.INDEX, b"a") == b"2"


def test_families_are_separate_keyspaces(store: Store) -> None:
    write(store, ("put", Family.DATA, b"k", b"data"))
    assert store.get(Family.INDEX, b"k") is None
    assert list(store.scan(Family.INDEX, b"", b"\xff")) == []


def test_get_many_keeps_order_and_reports_misses(store: Store) -> None:
    write(store, ("put", Family.DATA, b"x", b"1"), ("put", Family.DATA, b"z", b"3"))
    assert store.get_many(Family.DATA, [b"z", b"y", b"x"]) == [b"3", None, b"1"]
    assert store.get_many(Family.DATA, []) == []


def test_scan_honours_both_bounds_in_both_directions(store: Store) -> None:
    keys = [b"A9", b"Q1", b"S\x02a", b"S\x02b", b"S\x03a", b"T1"]
    write(store, *(("put", Family.INDEX, k, k) for k in keys))
    assert [k for k, _ in store.scan(Family.INDEX, b"S\x02", b"S\x03")] == [b"S\x02a", b"S\x02b"]
    assert [k for k, _ in store.scan(Family.INDEX, b"S\x02", b"S\x03", reverse=True)] == [
        b"S\x02b",
        b"S\x02a",
    ]
    assert [k for k, _ in store.scan(Family.INDEX, b"S", b"T")] == [b"S\x02a", b"S\x02b", b"S\x03a"]
    assert list(store.scan(Family.INDEX, b"B", b"C")) == []
    assert store.last_key(Family.INDEX, b"Q", b"T") == b"S\x03a"
    assert store.last_key(Family.INDEX, b"U", b"V") is None


def test_a_batch_is_atomic_and_ordered(store: Store) -> None:
    write(
        store,
        ("put", Family.DATA, b"k", b"1"),
        ("delete", Family.DATA, b"k", None),
        ("put", Family.DATA, b"k", b"2"),
    )
    assert store.get(Family.DATA, b"k") == b"2"


def test_the_per_family_calls_write_where_their_names_say(store: Store) -> None:
    batch = store.batch()
    batch.put_data(b"k", b"data")
    batch.put_index(b"k", b"index")
    batch.put_data(b"gone", b"1")
    batch.put_index(b"gone", b"2")
    batch.delete_data(b"gone")
    batch.delete_index(b"gone")
    batch.put(Family.DATA, b"named", b"d")
    batch.put(Family.INDEX, b"named", b"i")
    assert len(batch) == 8  # deletes count: an empty batch is the only one not worth writing
    store.write(batch)
    assert store.get(Family.DATA, b"k") == b"data"
    assert store.get(Family.INDEX, b"k") == b"index"
    assert store.get_many(Family.DATA, [b"gone", b"named"]) == [None, b"d"]
    assert store.get_many(Family.INDEX, [b"gone", b"named"]) == [None, b"i"]


def test_an_empty_batch_has_no_length(store: Store) -> None:
    assert len(store.batch()) == 0


def test_sync_and_compact_keep_data(store: Store) -> None:
    write(store, *(("put", Family.INDEX, b"i%05d" % i, b"") for i in range(1000)))
    write(store, *(("delete", Family.INDEX, b"i%05d" % i, None) for i in range(999)))
    store.sync()
    store.compact()
    assert [k for k, _ in store.scan(Family.INDEX, b"i", b"j")] == [b"i00999"]


def test_data_survives_reopen(tmp_path: Path) -> None:
    for name, make in IMPLEMENTATIONS.items():
        path = tmp_path / name
        s = make(path)
        write(s, ("put", Family.DATA, b"k", b"v"))
        s.sync()
        s.close()
        del s
        again = make(path)
        assert again.get(Family.DATA, b"k") == b"v"
        again.close()
