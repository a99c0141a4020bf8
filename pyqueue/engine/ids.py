"""Job ids: 64 bits, growing with creation time, carrying the shard that owns the job.

    | 44 bits: ms since 2020-01-01 | 12 bits: sequence | 8 bits: shard |

Ids only ever grow, even when the clock steps back or more than 4096 jobs arrive in one
millisecond (the sequence then borrows from the next millisecond). The generator is driven only by
the single writer, so it needs no lock.
"""

EPOCH_MS = 1_577_836_800_000
SHARD_BITS = 8
SEQUENCE_BITS = 12
MAX_SHARDS = 1 << SHARD_BITS


def shard_of(job_id: int) -> int:
    return job_id & (MAX_SHARDS - 1)


def created_ms_of(job_id: int) -> int:
    return (job_id >> (SHARD_BITS + SEQUENCE_BITS)) + EPOCH_MS


class IdGenerator:
    def __init__(self, shard: int, last: int = 0) -> None:
        if not 0 <= shard < MAX_SHARDS:
            raise ValueError(f"shard {shard} is outside 0..{MAX_SHARDS - 1}")
        self.shard = shard
        self.last = last

    def next(self, now_ms: int) -> int:
        candidate = ((now_ms - EPOCH_MS) << (SHARD_BITS + SEQUENCE_BITS)) | self.shard
        if candidate <= self.last:
            candidate = self.last + MAX_SHARDS
        self.last = candidate
        return candidate
