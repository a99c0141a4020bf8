"""The RocksDB store, through rocksdict.

rocksdict holds the GIL during put, write, get and iterator steps, and releases it in flush_wal,
compact_range, close and multi-get (see shared/MEASURED.md). So writes go out with sync=False from
the single writer, and durability is one `flush_wal(True)` per group of commits (`sync`).
"""

import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rocksdict import (
    BlockBasedOptions,
    BottommostLevelCompaction,
    CompactOptions,
    Options,
    Rdict,
    ReadOptions,
    WriteBatch,
    WriteOptions,
)

from pyqueue.store.contract import Batch, Family, StoreFullError

TOMBSTONE_WINDOW = 10_000
TOMBSTONE_TRIGGER = 5_000


def _is_disk_full(exc: Exception) -> bool:
    text = str(exc)
    return "No space left" in text or "NoSpace" in text


class RocksBatch:
    __slots__ = ("_count", "_handles", "wb")

    def __init__(self, handles: dict[Family, Any]) -> None:
        self.wb = WriteBatch(raw_mode=True)
        self._handles = handles
        self._count = 0

    def put(self, family: Family, key: bytes, value: bytes) -> None:
        self.wb.put(key, value, self._handles[family])
        self._count += 1

    def delete(self, family: Family, key: bytes) -> None:
        self.wb.delete(key, self._handles[family])
        self._count += 1

    def __len__(self) -> int:
        return self._count


class RocksStore:
    """A RocksDB directory with two column families, `data` and `index`."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        db_options = Options(raw_mode=True)
        db_options.create_if_missing(True)
        db_options.create_missing_column_families(True)
        db_options.increase_parallelism(2)
        self._db = Rdict(
            str(self.path),
            db_options,
            column_families={"data": self._data_options(), "index": self._index_options()},
        )
        self._families = {
            Family.DATA: self._db.get_column_family("data"),
            Family.INDEX: self._db.get_column_family("index"),
        }
        self._handles = {
            Family.DATA: self._db.get_column_family_handle("data"),
            Family.INDEX: self._db.get_column_family_handle("index"),
        }
        self._write_options = WriteOptions()
        self._write_options.sync = False

    @staticmethod
    def _family_options() -> Options:
        options = Options(raw_mode=True)
        # A queue deletes nearly everything it writes. Files dense with tombstones are compacted
        # on their own, so range scans (the start-up rebuild, listings) do not wade through them.
        options.add_compact_on_deletion_collector_factory(TOMBSTONE_WINDOW, TOMBSTONE_TRIGGER, 0.5)
        return options

    @classmethod
    def _data_options(cls) -> Options:
        # Point reads of records and payloads: a bloom filter answers "not here" without a read.
        options = cls._family_options()
        table = BlockBasedOptions()
        table.set_bloom_filter(10, False)
        options.set_block_based_table_factory(table)
        return options

    @classmethod
    def _index_options(cls) -> Options:
        # Range scans only: bloom filters would not help.
        return cls._family_options()

    def batch(self) -> RocksBatch:
        return RocksBatch(self._handles)

    def write(self, batch: Batch) -> None:
        assert isinstance(batch, RocksBatch), "a batch from another store"
        try:
            self._db.write(batch.wb, self._write_options)
        except Exception as exc:
            if _is_disk_full(exc):
                raise StoreFullError(str(exc)) from exc
            raise

    def sync(self) -> None:
        try:
            self._db.flush_wal(True)
        except Exception as exc:
            raise OSError(f"syncing the write-ahead log failed: {exc}") from exc

    def get(self, family: Family, key: bytes) -> bytes | None:
        value = self._families[family].get(key)
        return None if value is None else bytes(value)

    def get_many(self, family: Family, keys: Sequence[bytes]) -> list[bytes | None]:
        if not keys:
            return []
        values = self._families[family].get(list(keys))
        assert values is not None
        return list(values)

    def scan(
        self, family: Family, lo: bytes, hi: bytes, *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        # The bounds let RocksDB skip work, but rocksdict's seek_to_first does not honour the lower
        # bound, so the loop seeks explicitly and checks both ends itself.
        bounds = ReadOptions()
        bounds.set_iterate_lower_bound(lo)
        bounds.set_iterate_upper_bound(hi)
        it = self._families[family].iter(bounds)
        if reverse:
            it.seek_for_prev(hi)
            while it.valid():
                key = it.key()
                if key < lo:
                    return
                if key < hi:
                    yield key, it.value()
                it.prev()
        else:
            it.seek(lo)
            while it.valid():
                key = it.key()
                if key >= hi:
                    return
                yield key, it.value()
                it.next()

    def last_key(self, family: Family, lo: bytes, hi: bytes) -> bytes | None:
        for key, _ in self.scan(family, lo, hi, reverse=True):
            return key
        return None

    def compact(self) -> None:
        # A plain compaction may trivially move files to the bottom level with their tombstones;
        # forcing the bottommost level rewrites them and drops what they shadow.
        options = CompactOptions()
        options.set_bottommost_level_compaction(BottommostLevelCompaction.force())
        for family in self._families.values():
            family.compact_range(None, None, options)

    def close(self) -> None:
        self._db.close()
