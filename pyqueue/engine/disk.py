"""The free-space guard: refuse new work before the disk is full, not after.

Once RocksDB fails a write-ahead-log append for lack of space it stays failed until reopened, so
the server refuses enqueues (RESOURCE_EXHAUSTED) while free space is below a reserve, and takes
them again by itself when space returns. Acks, failures and deletes still go through: they are
small and they free space. Should the disk fill anyway (another process raced us), the writer
fails stop, and a restart recovers once there is room.
"""

import os
import time

from pyqueue.engine.errors import ResourceExhausted

MIB = 1 << 20


class DiskGuard:
    """Looks at the disk at most every `every_s` while there is ample room (a statvfs per
    enqueue is measurable on the one-job-per-call path), and at every enqueue once free space is
    within twice the reserve."""

    def __init__(self, path: str | os.PathLike[str], min_free_bytes: int, every_s: float = 0.05) -> None:
        self.path = path
        self.min_free_bytes = min_free_bytes
        self.every_s = every_s
        self._ample_until = 0.0

    def free_bytes(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def check(self) -> None:
        if self.min_free_bytes <= 0:
            return
        now = time.monotonic()
        if now < self._ample_until:
            return
        free = self.free_bytes()
        self._ample_until = now + self.every_s if free >= 2 * self.min_free_bytes else 0.0
        if free < self.min_free_bytes:
            raise ResourceExhausted(
                f"the disk holding {self.path} has {free // MIB} MiB free, below the reserve of "
                f"{self.min_free_bytes // MIB} MiB (--min-free-bytes); nothing was written, and enqueues are "
                "taken again as soon as space returns"
            )
