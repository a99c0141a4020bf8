"""The secret that lets the server's own relay (relay.py) call PullOutbox and ApplyInbox on its
shards, and no one else: not a client, not a token holder, not an `admin:*` token.

A sharded server's supervisor makes it at start; a cluster's nodes share one kept in the
cluster's bucket (whoever reaches NATS could rewrite the changelog anyway). The supervisor hands
it to its shards in their environment, which each shard empties at once: it is never on a
command line (every user sees those) and never in a log. The relay sends it as metadata and a
shard checks it before it reads anything else of the call."""

import hmac
import os
import secrets

RELAY_METADATA = "x-pyqueue-relay"
RELAY_ENV = "PYQUEUE_RELAY_SECRET"


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def take_from_environment() -> str | None:
    """This shard's secret, taken out of the environment (so no process it starts inherits it)."""
    return os.environ.pop(RELAY_ENV, None) or None


def holds_secret(secret: str | None, metadata: "tuple[tuple[str, str | bytes], ...] | None") -> bool:
    """Whether the call carries `secret` (never, when this server has none: one shard)."""
    if not secret:
        return False
    value = next((v for k, v in metadata or () if k == RELAY_METADATA), None)
    if value is None:
        return False
    given = value.encode() if isinstance(value, str) else value
    return hmac.compare_digest(given, secret.encode())
