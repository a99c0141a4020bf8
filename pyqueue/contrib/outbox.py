"""Jobs that commit with the app's own transaction (`pip install "pyqueue[sqlalchemy]"`): an
enqueue through the outbox is one INSERT on the session's connection, so it commits or rolls back
with the rest of the transaction; `pyqueue relay` (contrib/relay.py) then moves the committed
rows to the server and deletes each only after the server's durable answer.

    outbox = Outbox()                      # or Outbox(metadata=Base.metadata) for your migrations
    outbox.create(engine)                  # once, if you do not migrate it yourself

    with Session(engine) as session, session.begin():
        session.add(Order(id=42))
        outbox.enqueue(session, send_receipt, 42)           # an @app.job function, its arguments
        outbox.enqueue(session, send_receipt.options(priority=0), 42)
        outbox.enqueue_spec(session, {"type": "billing.sync", "payload": {"order": 42}})

    async with AsyncSession(engine) as session, session.begin():
        await outbox.enqueue_async(session, send_receipt, 42)

A row holds the job's spec as JSON; its id makes the job's unique key (`outbox:TABLE:ID`, scope
`exists`), so a relay that dies between the server's answer and the delete sends it again and
the server answers with the same job: each committed job is enqueued once. A spec with its own
unique_key keeps it (then its own scope decides)."""

import base64
import json
import time
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import BigInteger, Column, Float, Integer, MetaData, Table, Text, insert
from sqlalchemy.engine import Connection, Engine

from pyqueue.app import BoundJob, JobFunction
from pyqueue.client.spec import JOB_FIELDS

TABLE = "pyqueue_outbox"


class Outbox:
    def __init__(self, table: str = TABLE, metadata: MetaData | None = None) -> None:
        self.table = Table(
            table,
            metadata if metadata is not None else MetaData(),
            # BIGINT on PostgreSQL; SQLite's rowid needs INTEGER to autoincrement.
            Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
            Column("created_at", Float, nullable=False),
            Column("spec", Text, nullable=False),
            Column("refused", Text, nullable=True),  # the server's reason, if it refused the job for good
        )

    def create(self, bind: Engine | Connection) -> None:
        """Create the table if it is not there (your migrations may own it instead)."""
        self.table.create(bind, checkfirst=True)

    def enqueue(
        self, session: Any, job: JobFunction[Any, Any] | BoundJob[Any, Any], *args: Any, **kwargs: Any
    ) -> None:
        """Add a call of `job` to the session's transaction (a Session or a Connection)."""
        session.execute(insert(self.table).values(self.row(job_spec(job, args, kwargs))))

    def enqueue_spec(self, session: Any, spec: Mapping[str, Any]) -> None:
        """Add a job given as a spec (as for Client.enqueue_many: type, payload, options)."""
        session.execute(insert(self.table).values(self.row(spec)))

    async def enqueue_async(
        self, session: Any, job: JobFunction[Any, Any] | BoundJob[Any, Any], *args: Any, **kwargs: Any
    ) -> None:
        """`enqueue` on an AsyncSession or AsyncConnection."""
        await session.execute(insert(self.table).values(self.row(job_spec(job, args, kwargs))))

    async def enqueue_spec_async(self, session: Any, spec: Mapping[str, Any]) -> None:
        await session.execute(insert(self.table).values(self.row(spec)))

    def row(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """The row for `spec`, checked now (a bad spec fails the app's call, not the relay)."""
        unknown = set(spec) - JOB_FIELDS
        if unknown or "type" not in spec:
            raise TypeError(f"a job spec needs 'type' and only job fields (unknown: {sorted(unknown)})")
        return {"created_at": time.time(), "spec": json.dumps(_plain(spec), separators=(",", ":"))}


def job_spec(
    job: JobFunction[Any, Any] | BoundJob[Any, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    bound = job if isinstance(job, BoundJob) else BoundJob(job, job.defaults)
    function = bound.function
    function.enqueuing()
    return bound.opts.spec(function.name, function.payload(*args, **kwargs))


def _plain(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The spec as JSON holds it: run_at as epoch seconds, durations as seconds, a bytes payload
    as base64 (under its own name, so that no JSON payload is mistaken for one)."""
    plain: dict[str, Any] = {}
    for name, value in spec.items():
        if value is None:
            continue
        if name == "run_at" and isinstance(value, datetime):
            value = value.timestamp()
        elif isinstance(value, timedelta):
            value = value.total_seconds()
        elif name == "payload" and isinstance(value, bytes | bytearray | memoryview):
            name, value = "payload_base64", base64.b64encode(bytes(value)).decode()
        plain[name] = value
    return plain


def from_row(spec: str, created_at: float) -> dict[str, Any]:
    """A row's spec as Client.enqueue_many takes it; a delay counts from when the row was
    written, not from when the relay sends it."""
    found: dict[str, Any] = json.loads(spec)
    if "payload_base64" in found:
        found["payload"] = base64.b64decode(found.pop("payload_base64"))
    if found.get("run_at") is not None:
        found["run_at"] = datetime.fromtimestamp(float(found["run_at"])).astimezone()
    if found.get("delay"):
        found["run_at"] = datetime.fromtimestamp(created_at + float(found.pop("delay"))).astimezone()
    return found
