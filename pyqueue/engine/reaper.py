"""The reaper: fails attempts whose lease ran out (the job's timeout passed with no ack, fail or
extension). The retry policy then applies as for any failure, and a late ack is refused."""

from pyqueue.engine.alarm import AlarmClock


class Reaper(AlarmClock):
    name = "reaper"
