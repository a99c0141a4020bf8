"""How an owner stops when its shard is no longer its own: at once, answering nothing more (and
the exit codes that tell its supervisor why a shard process ended).

Whichever notices first calls `lost`: the writer, whose append the changelog refused (another node
appended its fence), or the lease keeper, which could not renew in time or found the lease taken.
The supervisor then starts the shard process again, as a standby.
"""

import logging
import os

log = logging.getLogger("pyqueue.cluster")
LOST_SHARD = 75  # the exit code of an owner that lost its shard
HANDED_OVER = 76  # the exit code of an owner that handed its shard over when asked (a move, a drain)


def lost(why: str) -> None:
    log.critical("lost the shard: %s; stopping at once", why)
    logging.shutdown()
    os._exit(LOST_SHARD)
