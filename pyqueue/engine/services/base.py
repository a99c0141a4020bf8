"""The one shape of a background service (after River's): a config with defaults, `start` and
`stop` that are safe to call twice, and `run_once`, one step that tests drive with an injected
clock and no sleeping. Between steps the service waits as it needs (`_idle`): an alarm for the
next due key, a period, a change. A step that fails is logged and tried again; it never ends the
service, so one bad entry or a refusing disk does not stop the rest.
"""

import asyncio
import logging
from typing import Any


class Service:
    name = "service"

    def __init__(self) -> None:
        self._task: asyncio.Task[None] | None = None
        self.log = logging.getLogger(f"pyqueue.{self.name}")

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Run in the background on the running event loop; a second call does nothing."""
        if not self.running:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"pyqueue-{self.name}")

    async def stop(self) -> None:
        """Stop between steps (a step under way is cancelled); a second call does nothing."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def run_once(self) -> Any:
        """One step; what it returns is the service's to say (how much it did)."""
        raise NotImplementedError

    async def _idle(self, done: Any, failed: bool) -> None:
        """Wait for the next step, given what the last one returned (None when it failed)."""
        raise NotImplementedError

    def _failed(self, exc: Exception) -> None:
        self.log.error("%s failed; trying again at its next step", self.name, exc_info=exc)

    async def _run(self) -> None:
        while True:
            done, failed = None, False
            try:
                done = await self.run_once()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._failed(exc)
                failed = True
            await self._idle(done, failed)
