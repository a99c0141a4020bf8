"""On PostgreSQL the relay waits for commits instead of polling: a statement trigger on the outbox
table NOTIFYs the table's name, which PostgreSQL delivers when (and only if) the transaction
commits, and the relay LISTENs on its own connection (psycopg 3).

The listener is a wake-up, never the record: a notification only says "look". The relay LISTENs
before its first read, so a row committed between a read and the wait still wakes it; and it
reads anyway every `fallback_s`, in case the trigger was dropped or the listening connection was
down when a row committed."""

import logging
import os
import select
from typing import Any

log = logging.getLogger("pyqueue.relay")
FUNCTION = "pyqueue_outbox_notify"


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def install_statements(table: str) -> list[str]:
    """Idempotent, and safe when several relays start at once: each part is made only if it is
    missing, and a concurrent maker's win is not an error."""
    function = f"""
DO $do$ BEGIN
  IF to_regprocedure('{FUNCTION}()') IS NULL THEN
    CREATE FUNCTION {FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $fn$
    BEGIN PERFORM pg_notify(TG_TABLE_NAME, ''); RETURN NULL; END $fn$;
  END IF;
EXCEPTION WHEN duplicate_function OR unique_violation THEN NULL;
END $do$"""
    trigger = f"""
DO $do$ BEGIN
  CREATE TRIGGER {FUNCTION} AFTER INSERT ON {quoted(table)}
    FOR EACH STATEMENT EXECUTE FUNCTION {FUNCTION}();
EXCEPTION WHEN duplicate_object THEN NULL;
END $do$"""
    return [function, trigger]


class Listener:
    """LISTEN on one channel over a connection of its own; `wait` returns when a notification
    came, the timeout passed or `interrupt` was called."""

    def __init__(self, engine: Any, channel: str) -> None:
        raw = engine.raw_connection()
        self._connection = raw.driver_connection
        raw.detach()  # ours for good: never handed back to the pool in autocommit
        if not callable(getattr(self._connection, "notifies", None)):
            self._connection.close()
            raise TypeError("LISTEN needs psycopg 3 (a postgresql+psycopg:// URL)")
        self._connection.autocommit = True
        self._connection.execute(f"LISTEN {quoted(channel)}")
        self._wake_r, self._wake_w = os.pipe()

    def wait(self, timeout: float) -> bool:
        """True if a notification came (or the wait was interrupted). Raises if the connection
        broke, so that the caller opens a new one."""
        ready, _, _ = select.select([self._connection.fileno(), self._wake_r], [], [], timeout)
        if self._wake_r in ready:
            os.read(self._wake_r, 64)
            return True
        if not ready:
            return False
        if list(self._connection.notifies(timeout=0)):
            return True
        # Readable and no notification: a part of one, or the server closed the connection,
        # which only a query tells.
        self._connection.execute("SELECT 1")
        return False

    def interrupt(self) -> None:
        os.write(self._wake_w, b"x")

    def close(self) -> None:
        try:
            self._connection.close()
        except Exception:  # a connection that broke has nothing left to close
            log.debug("closing the LISTEN connection", exc_info=True)
        os.close(self._wake_r)
        os.close(self._wake_w)
