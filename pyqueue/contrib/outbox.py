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

from collections.abc import Mapping
from typing import Any

from sqlalchemy import BigInteger, Column, Float, Integer, MetaData, Table, Text, event, insert
from sqlalchemy.engine import Connection, Engine

from pyqueue.app import BoundJob, JobFunction
from pyqueue.contrib import pg_notify
from pyqueue.contrib.outbox_rows import TABLE, from_row, job_spec, row_values

__all__ = ["TABLE", "Outbox", "from_row", "job_spec"]


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
            # A row's id is its job's unique key, so an id must never come back: without
            # AUTOINCREMENT SQLite hands out max(id)+1, and 1 again once the relay emptied the table.
            sqlite_autoincrement=True,
        )
        # On PostgreSQL, a commit that added rows wakes the relays (LISTEN/NOTIFY), whoever makes
        # the table: create() here, or metadata.create_all() in your own set-up.
        event.listen(self.table, "after_create", _notify_trigger)

    def create(self, bind: Engine | Connection) -> None:
        """Create the table if it is not there (your migrations may own it instead: on
        PostgreSQL the relay adds the NOTIFY trigger itself when it starts)."""
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
        return row_values(spec)


def _notify_trigger(table: Table, connection: Connection, **_: Any) -> None:
    if connection.dialect.name == "postgresql":
        for statement in pg_notify.install_statements(table.name):
            connection.exec_driver_sql(statement)
