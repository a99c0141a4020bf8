"""Explicit, configurable limits, checked before anything is written."""

import re
from dataclasses import dataclass, field

from pyqueue import defaults
from pyqueue.engine.errors import InvalidArgument, ResourceExhausted

_NAME = re.compile(r"[A-Za-z0-9_.:\-]+")
NAME_CHARACTERS = "letters, digits and _ . : -"
MIN_PRIORITY = 0
MAX_PRIORITY = 65535
DEFAULT_PRIORITY = defaults.PRIORITY
DEFAULT_QUEUE = "default"


# Headers carry context such as trace ids, not data: small and few.
MAX_HEADERS = 16
MAX_HEADER_NAME_BYTES = 128
MAX_HEADER_VALUE_BYTES = 1024


@dataclass(frozen=True, slots=True)
class Limits:
    max_payload_bytes: int = 1 << 20
    max_jobs_per_enqueue: int = 1000
    max_workflow_jobs: int = 10_000  # jobs one workflow call (a batch, a chain) may create
    max_batch_jobs: int = 100_000  # jobs one batch may hold, added to it or not
    max_name_length: int = 128
    max_prefetch: int = 10_000
    max_queues_per_stream: int = 256
    max_content_type_length: int = 128
    max_filter_names: int = 256  # queues or types in one filter (ids: query.MAX_IDS)
    max_error_bytes: int = 16 << 10  # a failure's message (cut beyond, not refused)
    max_backtrace_bytes: int = 64 << 10
    max_streams: int = 10_000  # worker streams open at once on one server (or shard)
    max_streams_per_connection: int = 100  # of those, held by one client connection
    max_stream_bytes: int = 16 << 20  # payload delivered to one stream and not yet answered
    _good_names: set[str] = field(default_factory=set, compare=False, repr=False)

    def check_name(self, what: str, name: str) -> None:
        if name in self._good_names:
            return
        self._check_name(what, name)
        if len(self._good_names) < 100_000:  # the common case: a few queues and types, over and over
            self._good_names.add(name)

    def check_job_names(self, index: int, type_: str, queue: str) -> None:
        """A new job's type and queue names (the message is formatted only for a name not seen)."""
        if type_ not in self._good_names or queue not in self._good_names:
            self.check_name(f"job {index}: type", type_)
            self.check_name(f"job {index}: queue", queue)

    def _check_name(self, what: str, name: str) -> None:
        if not name:
            raise InvalidArgument(f"{what} name is empty")
        if len(name.encode()) > self.max_name_length:
            raise InvalidArgument(
                f"{what} name {name[:40]!r}... is {len(name.encode())} bytes; the limit is "
                f"{self.max_name_length} (--max-name-length)"
            )
        if not _NAME.fullmatch(name):
            raise InvalidArgument(f"{what} name {name!r} may hold only {NAME_CHARACTERS}")

    def check_batch_size(self, n: int) -> None:
        if n == 0:
            raise InvalidArgument("the request holds no jobs")
        if n > self.max_jobs_per_enqueue:
            raise ResourceExhausted(
                f"{n} jobs in one call; the limit is {self.max_jobs_per_enqueue} (--max-jobs-per-enqueue): "
                "split the batch"
            )

    def check_payload(self, index: int, size: int) -> None:
        if size > self.max_payload_bytes:
            raise ResourceExhausted(
                f"job {index}: payload is {size} bytes; the limit is {self.max_payload_bytes} "
                "(--max-payload-bytes)"
            )

    def check_priority(self, index: int, priority: int) -> None:
        if not MIN_PRIORITY <= priority <= MAX_PRIORITY:
            raise InvalidArgument(
                f"job {index}: priority {priority} is outside {MIN_PRIORITY}..{MAX_PRIORITY} (0 runs first)"
            )

    def check_content_type(self, index: int, content_type: str) -> None:
        if len(content_type) > self.max_content_type_length:
            raise InvalidArgument(
                f"job {index}: content type is longer than {self.max_content_type_length} characters"
            )

    def check_headers(self, index: int, headers: dict[str, str]) -> None:
        if len(headers) > MAX_HEADERS:
            raise InvalidArgument(f"job {index}: {len(headers)} headers; the limit is {MAX_HEADERS}")
        for name, value in headers.items():
            if not name or len(name.encode()) > MAX_HEADER_NAME_BYTES:
                raise InvalidArgument(
                    f"job {index}: header name {name[:40]!r} is empty or longer than {MAX_HEADER_NAME_BYTES} bytes"
                )
            if len(value.encode()) > MAX_HEADER_VALUE_BYTES:
                raise InvalidArgument(
                    f"job {index}: header {name!r} is longer than {MAX_HEADER_VALUE_BYTES} bytes"
                )

    def check_job_key(self, where: str, what: str, key: str) -> None:
        """A limit key or a fair key; `where` starts the message ("job 3: ")."""
        if len(key.encode()) > self.max_name_length or not key.isprintable():
            raise InvalidArgument(
                f"{where}{what} {key[:40]!r} must be printable (no control characters) "
                f"and at most {self.max_name_length} bytes (--max-name-length)"
            )

    def check_filter(self, what: str, n: int) -> None:
        if n > self.max_filter_names:
            raise ResourceExhausted(
                f"{n} {what} in one filter; the limit is {self.max_filter_names}: split the request"
            )

    def check_prefetch(self, prefetch: int) -> None:
        if not 1 <= prefetch <= self.max_prefetch:
            raise InvalidArgument(f"prefetch {prefetch} is outside 1..{self.max_prefetch} (--max-prefetch)")
