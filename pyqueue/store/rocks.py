"""The RocksDB store, through rocksdict.

rocksdict holds the GIL during put, write, get and iterator steps, and releases it in flush_wal,
compact_range, close and multi-get (see shared/MEASURED.md). So writes go out with sync=False from
the single writer, and durability is one `flush_wal(True)` per group of commits (`sync`).
"""

import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rocksdict import (
    AccessType,
    BlockBasedOptions,
    BottommostLevelCompaction,
    Checkpoint,
    CompactOptions,
    DBRecoveryMode,
    Options,
    Rdict,
    ReadOptions,
    WriteBatch,
    WriteOptions,
)

from pyqueue.store.contract import Batch, DamagedReadError, Family, StoreDamagedError, StoreFullError
from pyqueue.store.durable_mark import lost_commits, write_mark

TOMBSTONE_WINDOW = 10_000
TOMBSTONE_TRIGGER = 5_000


def _is_disk_full(exc: Exception) -> bool:
    text = str(exc)
    return "No space left" in text or "NoSpace" in text


def _opening_error(path: Path, exc: Exception) -> Exception:
    """Why a store would not open, with what to do."""
    text = str(exc)
    if "lock" in text.lower():
        return StoreDamagedError(
            f"{path} is in use by another process (RocksDB holds its LOCK): stop the other "
            f"pyqueue serve first, or give another --data-dir ({text})"
        )
    if "Corruption" in text or "corrupt" in text.lower() or "checksum" in text.lower():
        return StoreDamagedError(
            f"{path} is damaged and was not opened: {text}. Nothing was changed. Choices: restore "
            f"it from a backup, or run `pyqueue repair --data-dir {path}`, which keeps what can be "
            "read and drops the rest (jobs may be lost)"
        )
    return StoreDamagedError(f"{path} could not be opened: {text}")


def missing_store(path: Path) -> str:
    """Why a start is refused where a store should be and is not, with what to do."""
    if not path.exists():
        return (
            f"{path} does not exist, where this server's store should be: if it lives on a volume, "
            "mount it; to start a new, empty store there, start once with --init"
        )
    return (
        f"{path} exists but holds no pyqueue store: if it is a volume that did not mount (or a "
        "store that was deleted), mount or restore it; to start a new, empty store there, start "
        "once with --init"
    )


def _symlink_view(path: Path) -> "tempfile.TemporaryDirectory[str]":
    """A temporary dir with a symlink to each of the store's files (RocksDB follows them)."""
    view = tempfile.TemporaryDirectory(prefix="pyqueue-read-")
    for entry in path.iterdir():
        if entry.is_file() and not entry.name.startswith(("LOG", "LOCK", "rocksdict-config")):
            os.symlink(entry.resolve(), Path(view.name) / entry.name)
    return view


class RocksBatch:
    """One atomic WriteBatch. The engine's hot path writes through `put_index` and `delete_index`,
    which are rocksdict's own methods (the index family is the batch's default, and most of a
    job's keys are index keys), and `put_data` and `delete_data`: a wrapper taking the family
    cost more than rocksdict's call itself (0.7 against 0.2-0.3 µs a key, bench/README.md)."""

    __slots__ = ("_data", "_index", "delete_index", "put_index", "wb")

    def __init__(self, handles: dict[Family, Any]) -> None:
        self.wb = WriteBatch(raw_mode=True)
        self._data = handles[Family.DATA]
        self._index = handles[Family.INDEX]
        self.wb.set_default_column_family(self._index)
        self.put_index = self.wb.put
        self.delete_index = self.wb.delete

    def put_data(self, key: bytes, value: bytes) -> None:
        self.wb.put(key, value, self._data)

    def delete_data(self, key: bytes) -> None:
        self.wb.delete(key, self._data)

    def put(self, family: Family, key: bytes, value: bytes) -> None:
        self.wb.put(key, value, self._data if family is Family.DATA else self._index)

    def write_many(
        self,
        data: Sequence[tuple[bytes, bytes]],
        index: Sequence[tuple[bytes, bytes]],
        data_deletes: Sequence[bytes],
        index_deletes: Sequence[bytes],
    ) -> None:
        put, family = self.wb.put, self._data
        for key, value in data:
            put(key, value, family)
        for key, value in index:
            put(key, value)
        delete = self.wb.delete
        for key in data_deletes:
            delete(key, family)
        for key in index_deletes:
            delete(key)

    def delete(self, family: Family, key: bytes) -> None:
        self.wb.delete(key, self._data if family is Family.DATA else self._index)

    def __len__(self) -> int:
        return int(self.wb.len())


def _damage_said(exc: Exception) -> Exception:
    """RocksDB's corruption (a plain Exception from rocksdict) as DamagedReadError; others as they are."""
    return DamagedReadError(str(exc)) if str(exc).startswith("Corruption:") else exc


class RocksStore:
    """A RocksDB directory with two column families, `data` and `index`."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        read_only: bool = False,
        max_open_files: int = -1,
        salvage: bool = False,
        create: bool = True,
    ) -> None:
        """Open (or create) the store. `read_only` opens an existing store for reading and never
        creates or changes anything (what `pyqueue check` uses). `salvage` opens a damaged one
        skipping every corrupt log record (what `pyqueue repair` uses: the records lost are lost).
        Without `create`, a directory that holds no store is refused, not started empty."""
        self.path = Path(path)
        leftovers = [
            p for p in self.path.glob("*") if p.suffix in (".sst", ".log") or p.name.startswith("MANIFEST")
        ]
        if not (self.path / "CURRENT").exists() and (read_only or leftovers):
            # Never start a new store over an old one's files: RocksDB would delete them.
            raise StoreDamagedError(
                f"{self.path} holds no store (its CURRENT file is missing): if a store was there, it "
                f"is damaged; `pyqueue repair --data-dir {self.path}` salvages what it can"
            )
        if not create and not (self.path / "CURRENT").exists():
            raise StoreDamagedError(missing_store(self.path))
        if not read_only:
            self.path.mkdir(parents=True, exist_ok=True)
        # Read-only opens go through a view of symlinks in a temporary dir: rocksdict 0.3.29 writes
        # its rocksdict-config.json, and RocksDB its LOG, into the dir it opens, and a check must
        # write nothing (it failed outright on a read-only mount).
        self._view = _symlink_view(self.path) if read_only else None
        opened = self._view.name if self._view is not None else str(self.path)
        db_options = Options(raw_mode=True)
        db_options.create_if_missing(not read_only)
        db_options.create_missing_column_families(not read_only)
        db_options.increase_parallelism(2)
        db_options.set_max_open_files(max_open_files)
        # Damage is loud: checksums verified, and a corrupt record in the middle of the log
        # refuses the start (a torn record at its very end, from a crash mid-write, is expected).
        db_options.set_paranoid_checks(not salvage)
        db_options.set_wal_recovery_mode(
            DBRecoveryMode.skip_any_corrupted_record()
            if salvage
            else DBRecoveryMode.tolerate_corrupted_tail_records()
        )
        try:
            self._db = Rdict(
                opened,
                db_options,
                column_families={"data": self._data_options(), "index": self._index_options()},
                access_type=AccessType.read_only() if read_only else AccessType.read_write(),
            )
        except Exception as exc:
            raise _opening_error(self.path, exc) from exc
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

    def checkpoint(self, path: Path) -> int:
        """A consistent copy of the store at `path` (which must not exist), with its durable mark;
        the sequence it ends at."""
        Checkpoint(self._db).create_checkpoint(str(path))
        copy = RocksStore(path, read_only=True)
        try:
            sequence = copy.latest_sequence()
        finally:
            copy.close()
        write_mark(path, sequence)
        return sequence

    def latest_sequence(self) -> int:
        return int(self._db.latest_sequence_number())

    def lost_commits(self) -> str:
        """Why this store lost acknowledged commits, by its durable mark ('' if it did not)."""
        return lost_commits(self.path, self.latest_sequence())

    def get(self, family: Family, key: bytes) -> bytes | None:
        try:  # a try costs nothing until it raises; a context manager a microsecond a read
            value = self._families[family].get(key)
        except Exception as exc:
            raise _damage_said(exc) from None
        return None if value is None else bytes(value)

    def get_many(self, family: Family, keys: Sequence[bytes]) -> list[bytes | None]:
        if not keys:
            return []
        try:
            values = self._families[family].get(list(keys))
        except Exception as exc:
            raise _damage_said(exc) from None
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
        # An iterator that met a damaged block stops as if at the end: say so, never a short scan.
        try:
            it.status()
        except Exception as exc:
            raise _damage_said(exc) from None

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

    def flush(self) -> None:
        """Write every memtable to table files (the log is then no longer needed)."""
        for family in self._families.values():
            family.flush(True)

    def stats(self) -> dict[str, int]:
        pending = sum(
            family.property_int_value("rocksdb.estimate-pending-compaction-bytes") or 0
            for family in self._families.values()
        )
        disk = 0
        with os.scandir(self.path) as entries:
            for entry in entries:
                if entry.is_file(follow_symlinks=False):
                    disk += entry.stat(follow_symlinks=False).st_size
        return {"disk_bytes": disk, "pending_compaction_bytes": pending}

    def close(self) -> None:
        # The column families' handles share the database: drop them too, so that the files'
        # lock is released now (a cluster's standby reopens the directory after a restore).
        for family in self._families.values():
            family.close()
        self._families.clear()
        self._handles.clear()
        self._db.close()
        if self._view is not None:
            self._view.cleanup()
