"""The one shape every background service shares (engine/services/base.py): start and stop are
safe to call twice, a failing step is logged and tried again, and each service is one of them."""

import asyncio
import logging

import pytest

from pyqueue.engine import Engine
from pyqueue.engine.services import CronService, DurableMarker, Service
from pyqueue.server.summary import Summaries


class Flaky(Service):
    name = "flaky"

    def __init__(self) -> None:
        super().__init__()
        self.steps = 0
        self.third = asyncio.Event()

    async def run_once(self) -> int:
        self.steps += 1
        if self.steps == 3:
            self.third.set()
        if self.steps == 1:
            raise RuntimeError("the first step fails")
        return self.steps

    async def _idle(self, done: int | None, failed: bool) -> None:
        await asyncio.sleep(0)


def test_start_and_stop_are_safe_to_repeat_and_a_failed_step_is_tried_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> Flaky:
        service = Flaky()
        await service.stop()  # never started: nothing to do
        service.start()
        first = service._task
        service.start()  # a second start does not start a second loop
        assert service._task is first and service.running
        await asyncio.wait_for(service.third.wait(), 30)
        await service.stop()
        await service.stop()
        assert not service.running
        return service

    with caplog.at_level(logging.ERROR, logger="pyqueue.flaky"):
        service = asyncio.run(scenario())
    assert service.steps >= 3
    assert "flaky failed; trying again" in caplog.text


async def test_every_background_service_has_the_shape(engine: Engine) -> None:
    services: list[object] = [*engine.services, engine.cron, engine.marker]
    assert all(isinstance(s, Service) for s in services)
    assert isinstance(engine.cron, CronService) and isinstance(engine.marker, DurableMarker)
    assert issubclass(Summaries, Service)
    for service in services:
        assert service.config is not None  # type: ignore[attr-defined]  # a config, with defaults
