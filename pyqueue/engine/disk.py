"""The free-space guard: refuse new work before the disk is full, not after.

Once RocksDB fails a write-ahead-log append for lack of space it stays failed until reopened, so
the server refuses enqueues (RESOURCE_EXHAUSTED) while free space is below a reserve, and takes
them again by itself when space returns. Acks, failures and deletes still go through: they are
small and they free space. Should the disk fill anyway (another process raced us), the writer
fails stop, and a restart recovers once there is room.
"""

import os

from pyqueue.engine.errors import ResourceExhausted

MIB = 1 << 20


class DiskGuard:
    def __init__(self, path: str | os.PathLike[str], min_free_bytes: int) -> None:
        self.path = path
        self.min_free_bytes = min_free_bytes

    def free_bytes(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def check(self) -> None:
        if self.min_free_bytes <= 0:
            return
        free = self.free_bytes()
        if free < self.min_free_bytes:
            raise ResourceExhausted(
                f"the disk holding {self.path} has {free // MIB} MiB free, below the reserve of "
                f"{self.min_free_bytes // MIB} MiB (--min-free-bytes); nothing was written, and enqueues are "
                "taken again as soon as space returns"
            )
