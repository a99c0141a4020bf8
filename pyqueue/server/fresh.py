"""A read that many callers may ask for at once, built once for all of them: what callers ask for
within `max_age_s` of the last build is that build (and callers that come during a build wait for
it), so a flood of scrapes or dashboard tabs costs one build a second, not one per call."""

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Fresh(Generic[T]):
    def __init__(
        self,
        build: Callable[[], Awaitable[T]],
        max_age_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._build = build
        self.max_age_s = max_age_s
        self._clock = clock
        self._value: tuple[float, T] | None = None
        self._building: asyncio.Future[T] | None = None
        self.builds = 0

    async def get(self) -> T:
        if self._value is not None and self._clock() - self._value[0] < self.max_age_s:
            return self._value[1]
        if self._building is None:
            self._building = asyncio.ensure_future(self._rebuild())
        return await asyncio.shield(self._building)

    async def _rebuild(self) -> T:
        try:
            started = self._clock()
            value = await self._build()
            self._value = (started, value)
            self.builds += 1
            return value
        finally:
            self._building = None
