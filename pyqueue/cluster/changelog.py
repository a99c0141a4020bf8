"""The changelog's entries: what a shard's owner appends to its JetStream stream, and what its
standbys apply to their own stores.

An entry is one commit batch as the keys it puts and deletes, so a standby applies it without the
engine: the owner's store and a standby's hold the same bytes. A batch larger than one NATS
message goes as PART entries closed by a BATCH entry; a reader applies the parts only with the
entry that closes them, so a batch cut short by its owner's death is never applied (it was never
answered either). A FENCE entry is a new owner's first append: any parts before it are dropped.

    entry  = kind:1 (B, P or F) op*
    op     = code:1 key_len:u32 key [value_len:u32 value]   (code: 0 put data, 1 put index,
                                                              2 delete data, 3 delete index)
"""

import struct
from collections.abc import Iterator, Sequence

from pyqueue.store import keys
from pyqueue.store.contract import Batch, Family, Store

BATCH, PART, FENCE = b"B", b"P", b"F"
PUT_DATA, PUT_INDEX, DELETE_DATA, DELETE_INDEX = 0, 1, 2, 3
_OP = struct.Struct(">BI")
_LEN = struct.Struct(">I")
# In a shard's store, beside what the entries write: the changelog sequence it holds up to, written
# in the same batch as the entry (so a copy that stops anywhere knows where to go on from).
APPLIED = keys.meta_key("changelog-applied")
_FAMILY = {
    PUT_DATA: Family.DATA,
    PUT_INDEX: Family.INDEX,
    DELETE_DATA: Family.DATA,
    DELETE_INDEX: Family.INDEX,
}


class DamagedEntry(Exception):
    """An entry that does not decode: the changelog holds something pyqueue did not write."""


class RecordingBatch:
    """A store's batch that also keeps its operations, encoded as they come, for the changelog."""

    __slots__ = ("inner", "parts", "size")

    def __init__(self, inner: Batch) -> None:
        self.inner = inner
        self.parts: list[bytes] = []
        self.size = 0

    def _record(self, code: int, key: bytes, value: bytes | None) -> None:
        head = _OP.pack(code, len(key))
        if value is None:
            self.parts += (head, key)
            self.size += len(head) + len(key)
        else:
            length = _LEN.pack(len(value))
            self.parts += (head, key, length, value)
            self.size += len(head) + len(key) + 4 + len(value)

    def put_data(self, key: bytes, value: bytes) -> None:
        self._record(PUT_DATA, key, value)
        self.inner.put_data(key, value)

    def put_index(self, key: bytes, value: bytes) -> None:
        self._record(PUT_INDEX, key, value)
        self.inner.put_index(key, value)

    def delete_data(self, key: bytes) -> None:
        self._record(DELETE_DATA, key, None)
        self.inner.delete_data(key)

    def delete_index(self, key: bytes) -> None:
        self._record(DELETE_INDEX, key, None)
        self.inner.delete_index(key)

    def write_many(
        self,
        data: Sequence[tuple[bytes, bytes]],
        index: Sequence[tuple[bytes, bytes]],
        data_deletes: Sequence[bytes],
        index_deletes: Sequence[bytes],
    ) -> None:
        for key, value in data:
            self.put_data(key, value)
        for key, value in index:
            self.put_index(key, value)
        for key in data_deletes:
            self.delete_data(key)
        for key in index_deletes:
            self.delete_index(key)

    def put(self, family: Family, key: bytes, value: bytes) -> None:
        (self.put_data if family is Family.DATA else self.put_index)(key, value)

    def delete(self, family: Family, key: bytes) -> None:
        (self.delete_data if family is Family.DATA else self.delete_index)(key)

    def __len__(self) -> int:
        return len(self.inner)

    def entries(self, max_bytes: int) -> list[bytes]:
        """The batch as changelog entries of at most `max_bytes` each (the last one a BATCH)."""
        entries: list[bytes] = []
        current: list[bytes] = []
        size = 1
        # Ops are recorded as 2 or 4 parts; split only between ops (a head starts each op).
        i = 0
        parts = self.parts
        while i < len(parts):
            code = parts[i][0]
            width = 2 if code in (DELETE_DATA, DELETE_INDEX) else 4
            op = parts[i : i + width]
            op_size = sum(len(p) for p in op)
            if current and size + op_size > max_bytes:
                entries.append(PART + b"".join(current))
                current, size = [], 1
            current += op
            size += op_size
            i += width
        entries.append(BATCH + b"".join(current))
        return entries


def decode(entry: bytes) -> Iterator[tuple[int, bytes, bytes | None]]:
    """The operations of a BATCH or PART entry: (code, key, value or None)."""
    view = memoryview(entry)
    at, end = 1, len(entry)
    try:
        while at < end:
            code, key_len = _OP.unpack_from(view, at)
            at += _OP.size
            key = bytes(view[at : at + key_len])
            at += key_len
            if code in (PUT_DATA, PUT_INDEX):
                (value_len,) = _LEN.unpack_from(view, at)
                at += 4
                value: bytes | None = bytes(view[at : at + value_len])
                at += value_len
            elif code in (DELETE_DATA, DELETE_INDEX):
                value = None
            else:
                raise DamagedEntry(f"unknown operation {code}")
            if at > end:
                raise DamagedEntry("an operation runs past the end of its entry")
            yield code, key, value
    except struct.error as exc:
        raise DamagedEntry(f"a cut operation ({exc})") from None


def apply(batch: Batch, entry: bytes) -> None:
    """Write the operations of `entry` into `batch`."""
    for code, key, value in decode(entry):
        family = _FAMILY[code]
        if value is None:
            batch.delete(family, key)
        else:
            batch.put(family, key, value)


def applied_sequence(store: Store) -> int:
    value = store.get(Family.DATA, APPLIED)
    return int.from_bytes(value, "big") if value else 0
