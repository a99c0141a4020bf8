"""The store contract: what the engine needs from persistence, and nothing more.

Two families split by access pattern: DATA is point-read (records, payloads, errors), INDEX is
range-scanned (status, queue, type indexes). A batch is atomic. `write` makes a batch visible and
crash-consistent; `sync` makes every write completed so far durable (the group-commit fsync).
"""

import enum
from collections.abc import Iterator, Sequence
from typing import Protocol


class Family(enum.Enum):
    DATA = "data"
    INDEX = "index"

    # Hash members by identity (Enum.__hash__ is Python code, and every key a batch writes looks
    # its family up in a dict).
    __hash__ = object.__hash__


class StoreFullError(Exception):
    """The disk is full: nothing of the failed batch was written."""


class StoreDamagedError(Exception):
    """The store could not be opened (damaged, missing, or in use); the message says what to do."""


class DamagedReadError(Exception):
    """A read met damaged data (a table block whose checksum fails): that read fails, the store
    goes on serving what is whole. The message is RocksDB's, with the file and offset."""


class Batch(Protocol):
    def put(self, family: Family, key: bytes, value: bytes) -> None: ...

    def delete(self, family: Family, key: bytes) -> None: ...

    # The same, one per family: what the engine calls for each key of a job (no family lookup).
    def put_data(self, key: bytes, value: bytes) -> None: ...

    def put_index(self, key: bytes, value: bytes) -> None: ...

    def delete_data(self, key: bytes) -> None: ...

    def delete_index(self, key: bytes) -> None: ...

    def write_many(
        self,
        data: Sequence[tuple[bytes, bytes]],
        index: Sequence[tuple[bytes, bytes]],
        data_deletes: Sequence[bytes],
        index_deletes: Sequence[bytes],
    ) -> None:
        """Puts to and deletes from each family, as one request's jobs need them (no key is both
        put and deleted, so their order does not matter)."""

    def __len__(self) -> int: ...


class Store(Protocol):
    def batch(self) -> Batch: ...

    def write(self, batch: Batch) -> None:
        """Apply the batch atomically (written to the OS, not yet synced)."""

    def sync(self) -> None:
        """Make every completed write durable. Raises OSError when the disk refuses."""

    def latest_sequence(self) -> int:
        """The sequence number of the last completed write (it only grows)."""

    def get(self, family: Family, key: bytes) -> bytes | None: ...

    def get_many(self, family: Family, keys: Sequence[bytes]) -> list[bytes | None]: ...

    def scan(
        self, family: Family, lo: bytes, hi: bytes, *, reverse: bool = False
    ) -> Iterator[tuple[bytes, bytes]]:
        """Entries with lo <= key < hi, in key order (or reversed)."""

    def last_key(self, family: Family, lo: bytes, hi: bytes) -> bytes | None: ...

    def stats(self) -> dict[str, int]:
        """`disk_bytes` (the store's files) and `pending_compaction_bytes` (RocksDB's estimate)."""

    def compact(self) -> None:
        """Compact both families fully, dropping the tombstones a queue leaves behind."""

    def close(self) -> None: ...
