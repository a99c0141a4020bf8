"""A payload must be what its content type says, checked when it is written (an enqueue, a change):
one job whose bytes its workers cannot decode must be refused at the door, not found by every
worker of its queue later. JSON is the one type the server can check; other types pass as bytes.
"""

import json

JSON = "application/json"


def payload_problem(content_type: str, payload: bytes) -> str:
    """What is wrong with `payload` for `content_type` ('' when nothing is)."""
    if content_type != JSON:
        return ""
    try:
        json.loads(payload)
    except RecursionError:
        return "the payload is JSON nested too deeply to decode, though its content type is application/json"
    except ValueError as exc:  # not UTF-8, or not JSON
        return f"the payload is not valid JSON, though its content type is application/json ({exc})"
    return ""
