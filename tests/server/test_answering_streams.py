"""A stopping server's answering streams: one that opens after the stop began ends without
reading a request (its client sends it again elsewhere), and one reopened serves again."""

import asyncio
from typing import Any

import grpc

from pyqueue.server.status import EOF, AnsweringStreams, answer_each


class Context:
    """What answer_each reads from and writes to: the requests it is given, the answers it wrote."""

    def __init__(self, requests: list[Any]) -> None:
        self.requests, self.written = list(requests), []  # type: ignore[var-annotated]

    async def read(self) -> Any:
        return self.requests.pop(0) if self.requests else EOF

    async def write(self, answer: Any) -> None:
        self.written.append(answer)


async def echo(request: Any, context: Any) -> Any:
    return ("answer", request)


def refusal(code: grpc.StatusCode, message: str) -> Any:
    return ("refused", code, message)


def test_a_stream_opened_after_the_stop_began_reads_nothing_and_one_opened_again_serves() -> None:
    async def scenario() -> None:
        streams = AnsweringStreams()
        streams.end_all()
        late = Context(["r1"])
        await answer_each(echo, late, refusal, streams)  # type: ignore[arg-type]
        assert late.requests == ["r1"] and late.written == []
        streams.open_again()
        served = Context(["r1", "r2"])
        await answer_each(echo, served, refusal, streams)  # type: ignore[arg-type]
        assert served.written == [("answer", "r1"), ("answer", "r2")]
        assert not streams

    asyncio.run(asyncio.wait_for(scenario(), 30))
