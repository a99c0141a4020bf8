"""The engine's background services, one shape for all (base.py): the scheduler, reaper and purger
(alarm clocks over the timer sets), cron, and the durable marker. Each holds its own logic; the
engine only builds, starts and stops them."""

from pyqueue.engine.services.alarm import AlarmClock, AlarmConfig
from pyqueue.engine.services.base import Service
from pyqueue.engine.services.cron import CronConfig, CronService
from pyqueue.engine.services.durable_marker import DurableMarker, MarkerConfig
from pyqueue.engine.services.flow_sweeper import FlowSweeper, SweeperConfig
from pyqueue.engine.services.purger import Purger
from pyqueue.engine.services.reaper import Reaper
from pyqueue.engine.services.scheduler import Scheduler

__all__ = [
    "AlarmClock",
    "AlarmConfig",
    "CronConfig",
    "CronService",
    "DurableMarker",
    "FlowSweeper",
    "MarkerConfig",
    "Purger",
    "Reaper",
    "Scheduler",
    "Service",
    "SweeperConfig",
]
