"""How the HTTP port answers, in one place: the dashboard's API, the jobs API and the port's own
paths (/healthz, /metrics, refusals of a token) share one shape, and every JSON refusal is
`{"error": what to fix, "code": the gRPC status name}` (docs/http.md)."""

import json
from collections.abc import Callable
from typing import Any

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


def answer(
    start_response: StartResponse,
    status: str,
    body: bytes,
    content_type: str = "text/plain; charset=utf-8",
    extra: list[tuple[str, str]] | None = None,
) -> list[bytes]:
    headers = [
        ("Content-Type", content_type),
        ("Content-Length", str(len(body))),
        ("Cache-Control", "no-store"),  # every answer is live state
        *(extra or []),
    ]
    start_response(status, headers)
    return [body]


def json_answer(
    start_response: StartResponse, status: str, body: Any, extra: list[tuple[str, str]] | None = None
) -> list[bytes]:
    return answer(start_response, status, json.dumps(body).encode(), "application/json", extra)


def error_answer(
    start_response: StartResponse,
    status: str,
    message: str,
    code: str,
    extra: list[tuple[str, str]] | None = None,
) -> list[bytes]:
    return json_answer(start_response, status, {"error": message, "code": code}, extra)
