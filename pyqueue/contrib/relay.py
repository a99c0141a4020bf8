"""The outbox relay: moves committed outbox rows (contrib/outbox.py) to the server, oldest first,
and deletes them only after the server's durable answer. `pyqueue relay --database URL` runs it.

A step (`run_once`) reads up to `batch` rows, enqueues them in one call (all or nothing), and
deletes them in the same database transaction. If the relay dies after the server answered and
before the delete committed, the rows are sent again; each carries its row's unique key (scope
`exists`, the job kept findable for `keep_s`), so the server answers with the job it already has.
While the server is unreachable, rows wait and the app's transactions go on committing.

A row the server refuses for good (INVALID_ARGUMENT, PERMISSION_DENIED, RESOURCE_EXHAUSTED, ...) would
block every row behind it: the step sends the rows one by one, marks each refused one with the
server's reason (the `refused` column, kept for you to read and fix) and goes on.

On PostgreSQL several relays may share the table (`FOR UPDATE SKIP LOCKED`), and each waits for
commits with LISTEN/NOTIFY (contrib/pg_notify.py: no polling; a read every `listen_fallback_s`
all the same). Elsewhere (SQLite) run one (a second one is safe, the keys dedupe, but does the
work twice); it polls, backing off from `idle_min_s` to `idle_max_s` while the table is empty.
"""

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, create_engine, delete, select, update

from pyqueue import failpoints
from pyqueue.client import Client
from pyqueue.contrib import pg_notify
from pyqueue.contrib.outbox import TABLE, Outbox, from_row
from pyqueue.contrib.outbox_rows import row_key
from pyqueue.errors import (
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    PyQueueError,
    ResourceExhausted,
)

log = logging.getLogger("pyqueue.relay")
# Refusals that are the row's (its queue, its size, its fields); anything else (unreachable, no
# answer in time, a bad token) is the server's or the setup's, and the rows wait for it.
REFUSALS = (InvalidArgument, NotFound, FailedPrecondition, ResourceExhausted, PermissionDenied)


@dataclass
class RelayConfig:
    database: str = "sqlite:///outbox.db"  # a SQLAlchemy URL
    table: str = TABLE
    batch: int = 500  # rows per step (one enqueue call)
    keep_s: float = 3600.0  # a relayed job stays findable by its row's key this long (at least)
    idle_min_s: float = 0.005
    idle_max_s: float = 0.02
    retry_s: float = 1.0  # the wait after the server could not be reached
    listen_fallback_s: float = 1.0  # PostgreSQL: the longest wait for a NOTIFY before a read


def engine_url(database: str) -> str:
    """`postgresql://` means psycopg 3 here (the `postgres` extra), which LISTEN needs; a URL
    that names its driver keeps it."""
    if database.startswith(("postgresql://", "postgres://")):
        return "postgresql+psycopg://" + database.split("://", 1)[1]
    return database


def _check_ids_never_reused(engine: Engine, table: str) -> None:
    """Refuse a SQLite table whose ids come back (no AUTOINCREMENT): a reused id would make a
    new row's job look like one already sent, and the server would drop it as a duplicate."""
    with engine.connect() as connection:
        ddl = connection.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)
        ).scalar()
    if ddl is not None and "AUTOINCREMENT" not in ddl.upper():
        raise ValueError(
            f"the outbox table {table} has no AUTOINCREMENT: SQLite reuses its ids once rows are deleted, "
            "and a reused id would be taken for a job already sent. Recreate it with "
            "'id INTEGER PRIMARY KEY AUTOINCREMENT' (Outbox().create does) once the relay has emptied it"
        )


class OutboxRelay:
    def __init__(
        self,
        config: RelayConfig,
        client: Client,
        engine: Engine | None = None,
        wait: Callable[[float], bool] | None = None,
    ) -> None:
        self.config = config
        self.client = client
        self.engine = engine or create_engine(engine_url(config.database))
        self.outbox = Outbox(config.table)
        self.outbox.create(self.engine)
        if self.engine.dialect.name == "sqlite":
            _check_ids_never_reused(self.engine, config.table)
        self.listens = self.engine.dialect.name == "postgresql"
        if self.listens:  # a table made by the app's own migrations may lack the trigger
            with self.engine.begin() as connection:
                for statement in pg_notify.install_statements(config.table):
                    connection.exec_driver_sql(statement)
        self._stop = threading.Event()
        self._wait = wait or self._stop.wait  # tests give their own
        self._thread: threading.Thread | None = None
        self._listener: pg_notify.Listener | None = None
        self._listen_again_at = 0.0
        self.relayed = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="pyqueue-relay", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        listener = self._listener
        if listener is not None:
            listener.interrupt()
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def listening(self) -> bool:
        """Waiting for commits by LISTEN/NOTIFY (PostgreSQL, its connection up)."""
        return self._listener is not None

    def run(self) -> None:
        delay, idle = 0.0, False
        try:
            while not (self._wait_for_commit() if idle and self.listens else self._wait(delay)):
                delay, idle = self._step(delay)
        finally:
            if self._listener is not None:
                self._listener.close()
                self._listener = None

    def _step(self, delay: float) -> tuple[float, bool]:
        """One run_once; the pause before the next, and whether the table was left empty."""
        try:
            moved = self.run_once()
        except PyQueueError as exc:
            log.warning(
                "the server did not take the outbox's jobs (%s); again in %.1fs", exc, self.config.retry_s
            )
            return self.config.retry_s, False
        except Exception:  # the database (locked, gone, restarting): the rows are still there
            log.exception("the outbox could not be read or updated; again in %.1fs", self.config.retry_s)
            return self.config.retry_s, False
        if moved == self.config.batch:
            return 0.0, False  # more are waiting
        if moved:
            return self.config.idle_min_s, True
        return min(max(delay * 2, self.config.idle_min_s), self.config.idle_max_s), True

    def _wait_for_commit(self) -> bool:
        """PostgreSQL, the table read empty: wait for a NOTIFY (polling while the LISTEN
        connection is down). True once stopped."""
        listener = self._listener
        if listener is None:
            if self._listen() is not None:
                return self._stop.is_set()  # read once more: a row may have committed before the LISTEN
            return self._wait(self.config.idle_max_s)
        try:
            listener.wait(self.config.listen_fallback_s)
        except Exception as exc:  # the database went away: poll until a new LISTEN holds
            log.warning("the outbox's LISTEN connection broke (%s); polling until it is back", exc)
            listener.close()
            self._listener = None
            self._listen_again_at = time.monotonic() + self.config.retry_s
        return self._stop.is_set()

    def _listen(self) -> pg_notify.Listener | None:
        if time.monotonic() < self._listen_again_at:
            return None
        try:
            self._listener = pg_notify.Listener(self.engine, self.config.table)
        except TypeError as exc:  # a driver without LISTEN: poll for good
            log.warning("%s; the relay polls", exc)
            self.listens = False
        except Exception as exc:
            log.warning("cannot LISTEN for the outbox's commits (%s); polling", exc)
            self._listen_again_at = time.monotonic() + self.config.retry_s
        return self._listener

    def run_once(self) -> int:
        """Move up to one batch of committed rows; the number moved (refused ones included)."""
        table = self.outbox.table
        query = select(table.c.id, table.c.created_at, table.c.spec).where(table.c.refused.is_(None))
        query = query.order_by(table.c.id).limit(self.config.batch)
        with self.engine.begin() as connection:
            if connection.dialect.name == "postgresql":
                query = query.with_for_update(skip_locked=True)
            rows = connection.execute(query).all()
            if not rows:
                return 0
            specs = [self._spec(row) for row in rows]
            try:
                self.client.enqueue_many(specs)
                failpoints.crash("relay_answered")  # tests: dead between the answer and the delete
                refused: dict[int, str] = {}
            except REFUSALS:
                refused = self._one_by_one(rows, specs)
            done = [row.id for row in rows if row.id not in refused]
            if done:
                connection.execute(delete(table).where(table.c.id.in_(done)))
            for row_id, reason in refused.items():
                connection.execute(update(table).where(table.c.id == row_id).values(refused=reason))
        self.relayed += len(done)
        return len(rows)

    def _one_by_one(self, rows: Sequence[Any], specs: list[dict[str, Any]]) -> dict[int, str]:
        refused: dict[int, str] = {}
        for row, spec in zip(rows, specs, strict=True):
            try:
                self.client.enqueue_many([spec])
            except REFUSALS as exc:
                refused[row.id] = f"{exc.code.name}: {exc}"
                log.error("outbox row %d refused by the server, kept with its reason: %s", row.id, exc)
        return refused

    def _spec(self, row: Any) -> dict[str, Any]:
        spec = from_row(row.spec, row.created_at)
        if not spec.get("unique_key"):
            spec["unique_key"] = row_key(self.config.table, row.id)
            spec["unique_scope"] = "exists"
        spec["keep_completed"] = max(float(spec.get("keep_completed") or 0), self.config.keep_s)
        return spec
