"""Auth files made in the test: five tokens, one per kind of holder, with known grants."""

import json
from pathlib import Path

from pyqueue.tokens import hash_token, new_token

GRANTS = {
    "producer": ["produce:emails"],
    "worker": ["work:emails"],
    "reader": ["read:emails"],
    "admin": ["admin:emails"],
    "root": ["admin:*"],
}


def write_auth_file(path: Path, grants: dict[str, list[str]] = GRANTS) -> dict[str, str]:
    secrets = {name: new_token() for name in grants}
    path.write_text(
        "".join(
            f'[[token]]\nname = "{name}"\nsha256 = "{hash_token(secrets[name])}"\n'
            f"grants = {json.dumps(grants[name])}\n\n"
            for name in grants
        )
    )
    return secrets
