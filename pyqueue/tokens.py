"""Tokens and grants, shared by the server's auth (server/auth.py) and `pyqueue token create`,
without the server's dependencies."""

import hashlib
import secrets

ROLES = ("produce", "work", "read", "admin")


class AuthFileError(Exception):
    """The auth file cannot be used; the message says what to fix."""


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_token() -> str:
    return "pq_" + secrets.token_urlsafe(32)


def parse_grant(text: str) -> tuple[str, str]:
    """ROLE:PATTERN, the pattern a shell-style glob over queue names."""
    role, sep, pattern = text.partition(":")
    if not sep or role not in ROLES or not pattern:
        raise AuthFileError(f"grant {text!r} is not ROLE:PATTERN with ROLE one of {', '.join(ROLES)}")
    return role, pattern
