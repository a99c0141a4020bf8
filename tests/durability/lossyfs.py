"""A FUSE passthrough that loses what was not synced when it is unmounted: a power cut on demand.

    python lossyfs.py BACKING MOUNTPOINT

Writes go straight to BACKING (so reads see them, as they would see the page cache), but the
filesystem remembers what is durable:
- a file's bytes are durable once the file is fsync'd: for each file it keeps the size at the last
  fsync and the old bytes of any in-place write below that size (an undo log);
- a directory's entries are durable once the directory is fsync'd: until then, files created or
  renamed into it are not there for good, and files unlinked or replaced in it are kept aside.

On unmount (the "power cut") everything rolls back to its durable state: files are cut to their
synced size and their undo logs applied; directories get back exactly their synced entries; files
that no synced entry names are deleted. A remount then starts from that state. Single-threaded.
"""

import errno
import os
import sys
from pathlib import Path
from typing import Any

import mfusepy as fuse

TRASH = ".lossyfs-trash"


class LossyFS(fuse.Operations):  # type: ignore[misc]
    use_ns = True

    def __init__(self, backing: str) -> None:
        self.root = os.path.realpath(backing)
        self.trash = os.path.join(self.root, TRASH)
        os.makedirs(self.trash, exist_ok=True)
        self.durable_size: dict[int, int] = {}  # ino -> size at the last fsync
        self.undo: dict[int, list[tuple[int, bytes]]] = {}  # ino -> (offset, old bytes), oldest first
        self.durable_entries: dict[str, dict[str, int]] = {}  # dir (relative) -> {name: ino}
        for dirpath, dirnames, filenames in os.walk(self.root):
            rel = os.path.relpath(dirpath, self.root)
            if rel.startswith(TRASH):
                continue
            dirnames[:] = [d for d in dirnames if d != TRASH]
            entries = {}
            for name in filenames + dirnames:
                st = os.lstat(os.path.join(dirpath, name))
                entries[name] = st.st_ino
                if not os.path.isdir(os.path.join(dirpath, name)):
                    self.durable_size[st.st_ino] = st.st_size
            self.durable_entries[rel] = entries

    def _full(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    def _ino(self, path: str) -> int:
        return os.lstat(self._full(path)).st_ino

    def _park(self, full: str) -> None:
        """Keep an unlinked or replaced file aside until its directory is synced."""
        ino = os.lstat(full).st_ino
        os.rename(full, os.path.join(self.trash, str(ino)))

    # Metadata.
    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        try:
            st = os.lstat(self._full(path))
        except FileNotFoundError:
            raise fuse.FuseOSError(errno.ENOENT) from None
        keys = (
            "st_mode",
            "st_nlink",
            "st_uid",
            "st_gid",
            "st_size",
            "st_atime",
            "st_mtime",
            "st_ctime",
            "st_ino",
        )
        return {k: getattr(st, k) for k in keys}

    def readdir(self, path: str, fh: int) -> list[str]:
        names = [n for n in os.listdir(self._full(path)) if n != TRASH]
        return [".", "..", *names]

    def statfs(self, path: str) -> dict[str, int]:
        st = os.statvfs(self.root)
        return {
            k: getattr(st, k)
            for k in (
                "f_bsize",
                "f_frsize",
                "f_blocks",
                "f_bfree",
                "f_bavail",
                "f_files",
                "f_ffree",
                "f_favail",
                "f_flag",
                "f_namemax",
            )
        }

    def access(self, path: str, amode: int) -> int:
        return 0

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self._full(path), mode)
        return 0

    def utimens(self, path: str, times: Any = None) -> int:
        return 0

    def mkdir(self, path: str, mode: int) -> int:
        os.mkdir(self._full(path), mode)
        self.durable_entries.setdefault(path.lstrip("/") or ".", {})
        return 0

    def rmdir(self, path: str) -> int:
        os.rmdir(self._full(path))
        return 0

    def unlink(self, path: str) -> int:
        self._park(self._full(path))
        return 0

    def rename(self, old: str, new: str) -> int:
        target = self._full(new)
        if os.path.exists(target):
            self._park(target)
        os.rename(self._full(old), target)
        return 0

    # Data.
    def create(self, path: str, mode: int, fi: Any = None) -> int:
        fd = os.open(self._full(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        self.durable_size.setdefault(os.fstat(fd).st_ino, 0)
        return fd

    def open(self, path: str, flags: int) -> int:
        return os.open(self._full(path), flags & ~(os.O_CREAT | os.O_EXCL))

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        return os.pread(fh, size, offset)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        ino = os.fstat(fh).st_ino
        durable = self.durable_size.get(ino, 0)
        if offset < durable:  # an in-place write over synced bytes: remember what was there
            old = os.pread(fh, min(len(data), durable - offset), offset)
            self.undo.setdefault(ino, []).append((offset, old))
        return os.pwrite(fh, data, offset)

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        full = self._full(path)
        ino = os.lstat(full).st_ino
        durable = self.durable_size.get(ino, 0)
        if length < durable:
            with open(full, "rb") as f:
                f.seek(length)
                self.undo.setdefault(ino, []).append((length, f.read(durable - length)))
        os.truncate(full, length)
        return 0

    def fallocate(self, path: str, mode: int, offset: int, length: int, fh: int) -> int:
        raise fuse.FuseOSError(errno.EOPNOTSUPP)

    def flush(self, path: str, fh: int) -> int:
        return 0

    def release(self, path: str, fh: int) -> int:
        os.close(fh)
        return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        os.fsync(fh)
        st = os.fstat(fh)
        self.durable_size[st.st_ino] = st.st_size
        self.undo.pop(st.st_ino, None)
        return 0

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        rel = path.lstrip("/") or "."
        full = self._full(path)
        self.durable_entries[rel] = {
            n: os.lstat(os.path.join(full, n)).st_ino for n in os.listdir(full) if n != TRASH
        }
        return 0

    # The power cut.
    def cut(self) -> None:
        where: dict[int, str] = {}
        for dirpath, _dirnames, filenames in os.walk(self.root):
            for name in filenames:
                full = os.path.join(dirpath, name)
                where[os.lstat(full).st_ino] = full
        staging = os.path.join(self.root, ".lossyfs-staging")
        os.makedirs(staging, exist_ok=True)
        for ino, full in where.items():
            os.rename(full, os.path.join(staging, str(ino)))
        kept = set()
        for rel, entries in self.durable_entries.items():
            for name, ino in entries.items():
                source = os.path.join(staging, str(ino))
                if ino in where and os.path.exists(source) and ino not in kept:
                    os.rename(source, os.path.join(self.root, rel, name))
                    kept.add(ino)
        for ino in kept:
            path = next(
                os.path.join(self.root, rel, n)
                for rel, e in self.durable_entries.items()
                for n, i in e.items()
                if i == ino
            )
            with open(path, "r+b") as f:
                for offset, old in reversed(self.undo.get(ino, [])):
                    f.seek(offset)
                    f.write(old)
                f.truncate(self.durable_size.get(ino, 0))
        for leftover in Path(staging).iterdir():
            leftover.unlink()
        os.rmdir(staging)


def main() -> None:
    backing, mountpoint = sys.argv[1], sys.argv[2]
    fs = LossyFS(backing)
    fuse.FUSE(fs, mountpoint, foreground=True, nothreads=True)
    fs.cut()


if __name__ == "__main__":
    main()
