"""The flow sweeper: drops the bookkeeping of finished batches and the marks of cancelled
workflows once their retention has run out (the jobs' own: --keep-completed, --keep-dead)."""

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pyqueue.engine.flows.requests import SweepFlows
from pyqueue.engine.services.base import Service


@dataclass(frozen=True, slots=True)
class SweeperConfig:
    every_s: float = 30.0
    per_step: int = 500  # entries dropped per write


class FlowSweeper(Service):
    name = "flow-sweeper"

    def __init__(
        self, submit: Callable[[Any], Awaitable[Any]], config: SweeperConfig = SweeperConfig()
    ) -> None:
        super().__init__()
        self._submit = submit
        self.config = config

    async def run_once(self) -> int:
        """Drop one write's worth of what is due; how many entries were dropped."""
        swept: int = await self._submit(SweepFlows(self.config.per_step))
        return swept

    async def _idle(self, done: int | None, failed: bool) -> None:
        if not done or done < self.config.per_step:
            await asyncio.sleep(self.config.every_s)
