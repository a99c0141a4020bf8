"""The scheduler: promotes scheduled jobs (delayed, or waiting for a retry) to ready when due."""

from pyqueue.engine.alarm import AlarmClock


class Scheduler(AlarmClock):
    name = "scheduler"
