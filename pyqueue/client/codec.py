"""Payload encoding: JSON by default, bytes pass through untouched."""

import json
from typing import Any

JSON = "application/json"
BYTES = "application/octet-stream"


def encode(payload: Any) -> tuple[bytes, str]:
    if payload is None:
        return b"", ""
    if isinstance(payload, bytes | bytearray | memoryview):
        return bytes(payload), BYTES
    return json.dumps(payload, separators=(",", ":")).encode(), JSON


def decode(raw: bytes, content_type: str) -> Any:
    if content_type == JSON:
        # From text: json.loads of bytes first guesses their encoding in Python, a quarter of the
        # decode of a small payload. UTF-16 and UTF-32, which it would also take, still decode.
        try:
            text = raw.decode()
        except UnicodeDecodeError:
            return json.loads(raw)
        return json.loads(text)
    if not raw and not content_type:
        return None
    return raw
