"""File descriptors: a server holds one per client connection and RocksDB one per open file, and
RocksDB failing to open its next log file stops the server. So the soft limit is raised to the
hard one at start (systemd's default soft limit is 1024), and RocksDB gets a bounded share of it
(`rocksdb_share`), the rest being the reserve for connections, which are capped below it
(`connection_cap`) so that a flood of idle clients cannot take the descriptors RocksDB needs."""

import logging
import resource

log = logging.getLogger("pyqueue.server")

CEILING = 1 << 20


def raise_limit() -> int:
    """Raise RLIMIT_NOFILE's soft limit as far as allowed; returns the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = CEILING if hard == resource.RLIM_INFINITY else min(hard, CEILING)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-file limit from %d: %s", soft, exc)
    if soft != resource.RLIM_INFINITY and soft < 4096:
        log.warning(
            "the open-file limit is %d: each client connection takes one; raise it (ulimit -n, "
            "LimitNOFILE=) for more than a few hundred clients",
            soft,
        )
    return CEILING if soft == resource.RLIM_INFINITY else int(soft)


def rocksdb_share(limit: int) -> int:
    """How many files RocksDB may keep open: a quarter of the limit, between 64 and 5000."""
    return max(64, min(limit // 4, 5000))


RESERVE = 64  # descriptors for everything else: the listening socket, logs, the lock, pipes


def http_connection_cap(limit: int) -> int:
    """How many HTTP connections to serve at once (a thread and a descriptor each): an eighth of
    what RocksDB's share and the reserve leave, between 8 and 256."""
    return max(8, min((limit - rocksdb_share(limit) - RESERVE) // 8, 256))


def connection_cap(limit: int) -> int:
    """How many gRPC client connections to accept at once: what the limit leaves after RocksDB's
    share, the HTTP port's and a reserve, at most 10,000."""
    return max(16, min(limit - rocksdb_share(limit) - http_connection_cap(limit) - RESERVE, 10_000))
