"""The Celery result backend `pyqueue://`: each stored state of a task (STARTED, RETRY, SUCCESS,
FAILURE, a group's members) is a record on the server, a completed job of the results queue
holding Celery's meta as its result (NewJob.completed_result), found again by its key
(GetJob by unique key, the newest record wins) and purged after `result_expires` by the
server's own purge. One durable enqueue per state, one GetJob per read.

Chords wait through Celery's `chord_unlock` task (this backend has no atomic counter), which
retries every second until the group is ready.
"""

import base64
from typing import Any

from celery.backends.base import KeyValueStoreBackend
from kombu.utils.url import url_to_parts

from pyqueue.contrib.celery.calls import UnaryCalls
from pyqueue.contrib.celery.transport import DEFAULT_PORT

RESULTS_QUEUE = "celery.results"
RECORD_TYPE = "celery.result"
DEFAULT_EXPIRES_S = 86_400.0  # Celery's own default result_expires: a day


def stored(value: str | bytes) -> Any:
    """Celery's encoded meta as a JSON value: text as it is, bytes (pickle, msgpack) in base64."""
    if isinstance(value, bytes):
        return {"base64": base64.b64encode(value).decode()}
    return value


def loaded(value: Any) -> str | bytes:
    if isinstance(value, dict):
        return base64.b64decode(value["base64"])
    return str(value)


class PyQueueBackend(KeyValueStoreBackend):
    """`backend="pyqueue://HOST:PORT"`; `result_backend_transport_options`: `token`, `tls`,
    `queue` (where the records go, default "celery.results")."""

    key_t = str
    driver_type = "pyqueue"
    supports_autoexpire = True
    supports_native_join = False

    def __init__(self, url: str | None = None, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, url=url, **kwargs)
        _, host, port, _, password, _, _ = url_to_parts(url or "pyqueue://")
        options = self.app.conf.get("result_backend_transport_options") or {}
        self.queue = options.get("queue", RESULTS_QUEUE)
        address = f"{host or '127.0.0.1'}:{port or DEFAULT_PORT}"
        self.server = UnaryCalls(address, token=password or options.get("token"), tls=options.get("tls"))
        self._keep_s = float(self.expires) if self.expires else DEFAULT_EXPIRES_S

    def get(self, key: str) -> Any:
        record = self.server.find(self.queue, key)
        return None if record is None else loaded(record.result())

    def mget(self, keys: list[str]) -> list[Any]:
        return [self.get(key) for key in keys]

    def set(self, key: str, value: str | bytes) -> None:
        record = {
            "type": RECORD_TYPE,
            "queue": self.queue,
            "unique_key": key,
            "completed_result": stored(value),
            "keep_result": self._keep_s,
        }
        self.server.enqueue([record])

    def delete(self, key: str) -> None:
        record = self.server.find(self.queue, key)
        if record is not None:
            self.server.change("DeleteJobs", ids=[record.id])

    def __reduce__(self, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
        return super().__reduce__(args, dict(kwargs or {}, url=self.url))
