"""The purger: deletes completed and dead jobs whose retention ran out, with their payload and
error records, in batches. Driven by the expiring set, so it never scans the store."""

from pyqueue.engine.alarm import AlarmClock


class Purger(AlarmClock):
    name = "purger"
