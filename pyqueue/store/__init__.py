"""Persistence: the key codec, the record codec, and the store behind a small contract.

The store knows no queue policy and no transport: it reads, writes atomic batches, scans ranges
and syncs. `contract.Store` is the interface; `rocks.RocksStore` the implementation.
"""

from pyqueue.store.contract import Batch, DamagedReadError, Family, Store, StoreDamagedError, StoreFullError
from pyqueue.store.records import JobRecord, Status
from pyqueue.store.rocks import RocksStore

__all__ = [
    "Batch",
    "DamagedReadError",
    "Family",
    "JobRecord",
    "RocksStore",
    "Status",
    "Store",
    "StoreDamagedError",
    "StoreFullError",
]
