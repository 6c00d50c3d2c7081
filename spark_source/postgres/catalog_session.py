"""The capture's ordinary (non-replication) connection, opened again when the server dropped it.

The capture reads the catalog while it streams (a new table's key, a new type, the slot's state)
and writes heartbeats. A server restart or a terminated backend leaves that connection dead while
the replication stream reconnects by itself, so every statement here goes through :meth:`run`:
on a connection the server closed it connects again (for up to ``RECONNECT_TIMEOUT_S`` while the
server is still coming back) and runs the statement once more. The statements are reads or
idempotent, so running one again is safe.
"""
from __future__ import annotations

import logging
import time

from spark_source.postgres.errors import PostgresConnectionError
from spark_source.postgres.options import CdcOptions

log = logging.getLogger(__name__)
RECONNECT_TIMEOUT_S = 60.0   # how long a broken connection is retried (a server restart), replication's too


def reconnect(open_connection, what: str, why: str, clock, retriable: tuple):
    """``open_connection()`` tried again every half second while it raises one of ``retriable``
    (the server is still coming back), for up to ``RECONNECT_TIMEOUT_S``; then a
    ``PostgresConnectionError`` naming ``what`` broke, ``why``, and what to do."""
    deadline = clock() + RECONNECT_TIMEOUT_S
    while True:
        try:
            return open_connection()
        except retriable as e:
            if clock() > deadline:
                raise PostgresConnectionError(
                    f"{what} broke ({why}) and PostgreSQL did not take a new one within {RECONNECT_TIMEOUT_S:.0f} s "
                    f"({e}); restart the query once the server is back: it resumes from its checkpoint and loses "
                    "nothing") from None
            time.sleep(0.5)


class CatalogSession:
    """One autocommit connection; ``setup(conn)`` runs on the first one only (server checks, the
    publication). Driver-side, single-threaded."""

    def __init__(self, options: CdcOptions, setup=None, clock=time.monotonic):
        self.options = options
        self._setup = setup
        self._clock = clock
        self._conn = None

    @property
    def conn(self):
        from spark_source.postgres.slot import connect
        if self._conn is None:
            self._conn = connect(self.options)
            if self._setup is not None:
                setup, self._setup = self._setup, None
                setup(self._conn)
        return self._conn

    def run(self, fn, *args):
        """``fn(conn, *args)``, once more on a new connection when the server closed this one."""
        import psycopg2
        conn = self.conn
        try:
            return fn(conn, *args)
        except (psycopg2.OperationalError, psycopg2.InterfaceError) as e:
            if not conn.closed:
                raise
            self._reconnect(str(e).strip())
        return fn(self._conn, *args)

    def _reconnect(self, why: str) -> None:
        from spark_source.postgres.slot import connect
        log.warning("connection to PostgreSQL for slot '%s' broke (%s); reconnecting", self.options.slot_name, why)
        self.close()
        self._conn = reconnect(lambda: connect(self.options), "the connection to PostgreSQL", why, self._clock,
                               (PostgresConnectionError,))

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 — already broken
                pass
            self._conn = None
