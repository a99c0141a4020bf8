"""The HTTP API's body parser (server/http_limits.py): a list of jobs decoded a step at a time and
refused past the job limit, giving what json.loads gives wherever the steps cut the text."""

import json

import pytest

from pyqueue.server import http_limits
from pyqueue.server.http_limits import parse_jobs

BODIES = [
    b"[]",
    b" [ ] ",
    b'{"type": "one"}',
    b'[{"type": "a"}, {"type": "b", "payload": {"x": [1, 2, 3], "s": "],["}}]',
    b"[1, 23, 456]",  # a number cut at a step's end must not be taken short
    '[{"type": "é€😀"}]'.encode(),  # a character cut between steps
    b'  [  {"type": "a"}  ,  {"type": "b"}  ]  ',
]
BAD = [b'[{"type": "a"}] x', b"[1 2]", b'[{"type":', b"[", b"\xff"]


@pytest.mark.parametrize("step", [1, 2, 3, 7, 1 << 20])
def test_every_cut_of_the_text_parses_as_a_whole_body_does(
    monkeypatch: pytest.MonkeyPatch, step: int
) -> None:
    monkeypatch.setattr(http_limits._Text, "STEP", step)
    for body in BODIES:
        assert parse_jobs(body, 10) == json.loads(body), body
    for body in BAD:
        with pytest.raises(ValueError):
            parse_jobs(body, 10)


def test_a_list_past_the_limit_is_refused_before_the_rest_is_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(http_limits._Text, "STEP", 64)
    decoded = []
    real = http_limits._Text.more

    def counting(self, at, at_least=1):  # type: ignore[no-untyped-def]
        decoded.append(1)
        return real(self, at, at_least)

    monkeypatch.setattr(http_limits._Text, "more", counting)
    body = json.dumps([{"type": "t"}] * 100_000).encode()  # 1.4 MB
    with pytest.raises(http_limits.ResourceExhausted, match="--max-jobs-per-enqueue"):
        parse_jobs(body, 5)
    assert len(decoded) * 64 < 1000  # a few steps of 64 bytes, not the whole body


def test_one_value_across_many_chunks_is_parsed_a_few_times_not_once_a_chunk(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http_limits._Text, "STEP", 16)
    asked = []
    real = http_limits._Text.more

    def counting(self, at, at_least=1):  # type: ignore[no-untyped-def]
        asked.append(at_least)
        return real(self, at, at_least)

    monkeypatch.setattr(http_limits._Text, "more", counting)
    body = json.dumps([{"type": "t", "payload": "x" * 100_000}]).encode()  # 6,000 chunks of 16
    assert parse_jobs(body, 5) == json.loads(body)
    assert len(asked) < 40  # doubling: about log2(6,000) reads, not 6,000
