"""Who may do what: tokens from `--auth-file`, each with roles on queue patterns.

The file (TOML) names each token and holds the SHA-256 of its secret, never the secret itself
(`pyqueue token create` prints both the secret and the lines to add):

    [[token]]
    name = "web"
    sha256 = "9f86d081884c7d65..."
    grants = ["produce:emails", "produce:reports-*", "read:*"]

A grant is ROLE:PATTERN, the pattern a shell-style glob over queue names (`*`, `?`, `[...]`).
Roles:
- produce: enqueue, and get or wait for a job of the queue;
- work: take the queue's jobs (and answer, on the same stream, what was taken);
- read: list and count jobs, read their errors, list queues, workers and periodic jobs, metrics;
- admin: change, retry, cancel and delete jobs, pause, resume and limit queues, periodic jobs;
  and whatever the other roles may.

Clients send `authorization: Bearer TOKEN` as gRPC metadata. Tokens are long random secrets,
so a plain SHA-256 is enough to store them: there is nothing to guess.
"""

import tomllib
from collections.abc import Collection
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from pyqueue.engine.errors import EngineError
from pyqueue.tokens import AuthFileError, hash_token, parse_grant

METADATA_KEY = "authorization"
_SCHEME = "bearer "


class Unauthenticated(EngineError):
    code = "UNAUTHENTICATED"


class PermissionDenied(EngineError):
    code = "PERMISSION_DENIED"


@dataclass(frozen=True, slots=True)
class Principal:
    """A token's holder: its name (for the logs) and its grants, (role, queue pattern) pairs."""

    name: str
    grants: tuple[tuple[str, str], ...]

    def may(self, role: str, queue: str) -> bool:
        return any((r == role or r == "admin") and fnmatchcase(queue, p) for r, p in self.grants)

    def may_everywhere(self, role: str) -> bool:
        """Whether the role is held on every queue (a grant on `*`)."""
        return any((r == role or r == "admin") and p == "*" for r, p in self.grants)

    def may_somewhere(self, role: str) -> bool:
        return any(r == role or r == "admin" for r, _ in self.grants)

    def require(self, role: str, queues: Collection[str]) -> None:
        for queue in sorted(queues):
            if not self.may(role, queue):
                raise PermissionDenied(
                    f"token {self.name!r} lacks the {role} right on queue {queue!r}: add "
                    f'"{role}:{queue}" (or a pattern that covers it) to its grants in the auth file'
                )

    def require_everywhere(self, role: str, why: str) -> None:
        if not self.may_everywhere(role):
            raise PermissionDenied(
                f"token {self.name!r} lacks the {role} right on every queue ({role}:*), which {why}"
            )


class Authority:
    """The tokens a server accepts."""

    def __init__(self, principals: dict[str, Principal]) -> None:
        self._by_hash = principals

    @classmethod
    def load(cls, path: Path) -> "Authority":
        try:
            data = tomllib.loads(path.read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise AuthFileError(f"cannot read the auth file {path}: {exc}") from None
        principals: dict[str, Principal] = {}
        for i, entry in enumerate(data.get("token", [])):
            name, digest, grants = entry.get("name"), entry.get("sha256", ""), entry.get("grants", [])
            if not isinstance(name, str) or not name:
                raise AuthFileError(f"{path}: token {i + 1} has no name")
            if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest):
                raise AuthFileError(f"{path}: token {name!r}: sha256 must be 64 lowercase hex digits")
            if not isinstance(grants, list) or not all(isinstance(g, str) for g in grants):
                raise AuthFileError(f"{path}: token {name!r}: grants must be a list of ROLE:PATTERN strings")
            principals[digest] = Principal(name, tuple(parse_grant(g) for g in grants))
        if not principals:
            raise AuthFileError(f"{path} lists no [[token]]: no one could connect")
        return cls(principals)

    def authenticate(self, metadata: "tuple[tuple[str, str | bytes], ...] | None") -> Principal:
        value = next((v for k, v in metadata or () if k == METADATA_KEY), None)
        if value is None:
            raise Unauthenticated(
                "no token: send `authorization: Bearer TOKEN` (PYQUEUE_TOKEN for pyqueue's clients)"
            )
        text = value.decode() if isinstance(value, bytes) else value
        if not text.lower().startswith(_SCHEME):
            raise Unauthenticated("the authorization metadata must be `Bearer TOKEN`")
        # A lookup by the secret's hash: its timing tells nothing usable about the secret.
        principal = self._by_hash.get(hash_token(text[len(_SCHEME) :].strip()))
        if principal is None:
            raise Unauthenticated("the token is not known to this server (see its --auth-file)")
        return principal
