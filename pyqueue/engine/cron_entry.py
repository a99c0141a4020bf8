"""A periodic job as the server keeps it: a name, a cron schedule in a timezone, the job each tick
enqueues, whether it is paused, and the last tick it enqueued.

Entries live in the store (M cron:NAME, JSON), on the shard that owns the job's queue. The last
tick is written in the same batch as the job it enqueued (requests/cron.py), so a tick is
enqueued once, whatever crashes around it. Schedules are parsed by croniter: 5 fields, or 6 with
seconds first ("*/10 * * * * *": every ten seconds).
"""

import base64
import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from pyqueue.engine.errors import InvalidArgument
from pyqueue.engine.model import NewJob
from pyqueue.store import keys

PREFIX = "cron:"
MAX_MISSED_COUNTED = 10_000  # past this many missed ticks the count says "at least"
MAX_TIMEZONE_LENGTH = 64  # the longest IANA name is 32 characters


class ScheduleError(ValueError):
    """A schedule whose next tick cannot be computed (it never fires, or its timezone is gone)."""


@dataclass(frozen=True, slots=True)
class CronEntry:
    name: str
    schedule: str
    timezone: str
    job: NewJob
    paused: bool = False
    created_ms: int = 0
    last_tick_ms: int = 0  # the last tick enqueued (0: none yet; ticks count from created_ms)

    @property
    def key(self) -> bytes:
        return keys.meta_key(PREFIX + self.name)

    def encode(self) -> bytes:
        job = self.job
        return json.dumps(
            {
                "schedule": self.schedule,
                "timezone": self.timezone,
                "paused": self.paused,
                "created_ms": self.created_ms,
                "last_tick_ms": self.last_tick_ms,
                "job": {
                    "type": job.type,
                    "queue": job.queue,
                    "priority": job.priority,
                    "payload": base64.b64encode(job.payload).decode(),
                    "content_type": job.content_type,
                    "max_retries": job.max_retries,
                    "timeout_ms": job.timeout_ms,
                    "options": base64.b64encode(job.options).decode(),
                },
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def decode(cls, name: str, raw: bytes) -> "CronEntry":
        data = json.loads(raw)
        job = data["job"]
        return cls(
            name=name,
            schedule=data["schedule"],
            timezone=data["timezone"],
            paused=data["paused"],
            created_ms=data["created_ms"],
            last_tick_ms=data["last_tick_ms"],
            job=NewJob(
                job["type"],
                job["queue"],
                job["priority"],
                base64.b64decode(job["payload"]),
                job["content_type"],
                max_retries=job["max_retries"],
                timeout_ms=job["timeout_ms"],
                options=base64.b64decode(job["options"]),
            ),
        )

    def with_tick(self, tick_ms: int) -> "CronEntry":
        return replace(self, last_tick_ms=tick_ms)

    def next_tick_ms(self) -> int:
        """The first tick after the last one enqueued (or after the entry was made); ScheduleError
        when it cannot be computed."""
        return next_after(self.schedule, self.timezone, max(self.last_tick_ms, self.created_ms))

    def problem(self) -> str:
        """Why this entry cannot run ('' when it can): a stored entry is reported and skipped,
        never allowed to stop the others."""
        try:
            self.next_tick_ms()
        except ScheduleError as exc:
            return str(exc)
        return ""

    def due(self, now_ms: int) -> tuple[int, int] | None:
        """(the latest tick at or before now, how many ticks before it were missed), or None.

        After downtime only the latest missed tick is enqueued: one catch-up job, not a burst."""
        if self.paused:
            return None
        tick = self.next_tick_ms()
        if tick > now_ms:
            return None
        missed = 0
        while missed < MAX_MISSED_COUNTED:
            following = next_after(self.schedule, self.timezone, tick)
            if following > now_ms:
                break
            tick, missed = following, missed + 1
        return tick, missed


def check_schedule(schedule: str, timezone: str, now_ms: int | None = None) -> None:
    """Refuse a schedule that is not cron, or that can never fire (February 30), or a timezone
    that is not an IANA name."""
    fields = schedule.split()
    if len(fields) not in (5, 6):
        raise InvalidArgument(
            f"schedule {schedule!r} has {len(fields)} fields: give 5 (minute hour day month weekday) "
            "or 6 (seconds first)"
        )
    if not croniter.is_valid(schedule, second_at_beginning=len(fields) == 6):
        raise InvalidArgument(f"schedule {schedule!r} is not a valid cron expression")
    zone(timezone)
    now = int(datetime.now(UTC).timestamp() * 1000) if now_ms is None else now_ms
    try:
        next_after(schedule, timezone, now)
    except ScheduleError:
        raise InvalidArgument(
            f"schedule {schedule!r} never fires: no date matches it (February 30, say)"
        ) from None


def zone(timezone: str) -> ZoneInfo:
    if len(timezone) > MAX_TIMEZONE_LENGTH:
        raise InvalidArgument(
            f"timezone is {len(timezone)} characters; an IANA name such as Europe/Paris is at most "
            f"{MAX_TIMEZONE_LENGTH}"
        )
    try:
        return ZoneInfo(timezone or "UTC")
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a directory (Europe), a long name
        raise InvalidArgument(
            f"timezone {timezone[:64]!r} is unknown: give an IANA name such as Europe/Paris"
        ) from None


def next_after(schedule: str, timezone: str, after_ms: int) -> int:
    """The first tick strictly after `after_ms`, in ms; ScheduleError if there is none."""
    try:
        start = datetime.fromtimestamp(after_ms / 1000, UTC).astimezone(zone(timezone))
        seconds = len(schedule.split()) == 6
        following: datetime = croniter(schedule, start, second_at_beginning=seconds).get_next(datetime)
    except (InvalidArgument, ValueError, KeyError, OverflowError) as exc:  # croniter's errors are ValueErrors
        raise ScheduleError(
            f"the next run of {schedule!r} in {timezone or 'UTC'} cannot be computed ({exc})"
        ) from None
    return int(following.timestamp() * 1000)
