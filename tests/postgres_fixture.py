"""One embedded PostgreSQL server per test session (it starts in about a second), and a fresh
database per test, so slots, publications and tables of one test never meet another's.

Imported by tests/conftest.py, so integration and Spark tests alike can ask for ``postgres``
(the server) or ``pg_db`` (a :class:`PgDatabase` on it).
"""
from __future__ import annotations

import itertools

import pytest

_numbers = itertools.count()


class PgDatabase:
    """A database of its own on the session's server, with helpers to write and to look."""

    def __init__(self, server, dbname: str):
        self.server = server
        self.dbname = dbname

    @property
    def dsn(self) -> str:
        return self.server.dsn_for(self.dbname)

    def options(self, **extra) -> dict:
        """The source's options for this database (Debezium's names), plus ``extra``."""
        return {"dsn": self.dsn, "topic.prefix": "shop", "heartbeat.interval.ms": "0",
                **{k.replace("_", "."): str(v) for k, v in extra.items()}}

    def connect(self, autocommit: bool = True):
        return self.server.connect(self.dbname, autocommit=autocommit)

    def execute(self, sql: str, params=None) -> list[tuple]:
        return self.server.execute(sql, params, dbname=self.dbname)

    def slot(self, name: str) -> dict | None:
        rows = self.execute("SELECT active, restart_lsn, confirmed_flush_lsn FROM pg_replication_slots "
                            "WHERE slot_name = %s", (name,))
        if not rows or rows[0][2] is None:   # none, or still being created (no consistent point yet)
            return None
        from spark_source.postgres.pgoutput import lsn_from_str
        active, restart, confirmed = rows[0]
        return {"active": active, "restart_lsn": lsn_from_str(restart), "confirmed_flush_lsn": lsn_from_str(confirmed)}

    def drop_slot(self, name: str) -> None:
        """Drop a slot once the reader that held it is gone (its server process exits a moment
        after the client closed the connection)."""
        from tests.conftest import wait_until
        wait_until(lambda: not self.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s",
                                            (name,))[0][0], timeout=10, message=f"slot {name} released")
        self.execute("SELECT pg_drop_replication_slot(%s)", (name,))

    def drop(self) -> None:
        from tests.conftest import wait_until

        def slots_gone():
            self.server.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s "
                                "AND pid <> pg_backend_pid()", (self.dbname,))
            self.server.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                                "WHERE database = %s AND NOT active", (self.dbname,))
            return not self.server.execute("SELECT 1 FROM pg_replication_slots WHERE database = %s", (self.dbname,))
        wait_until(slots_gone, timeout=30, interval=0.1, message=f"the slots of {self.dbname} dropped")
        self.server.execute(f'DROP DATABASE IF EXISTS "{self.dbname}" WITH (FORCE)')


def own_database(server, prefix: str):
    """A fresh database on ``server`` (the session's, or one a test module started itself to
    restart or configure it): a generator for a fixture, dropped afterwards."""
    name = f"{prefix}_{next(_numbers)}"
    server.execute(f'CREATE DATABASE "{name}" OWNER "{server.user}"')
    database = PgDatabase(server, name)
    yield database
    database.drop()


def read_batches(capture, start, want: int, acknowledge: bool = False, timeout: float = 30):
    """A capture's batches from ``start`` until ``want`` records came: (records, end offset).
    With ``acknowledge`` each batch is acknowledged, as after Spark's commit; without it each
    batch's start is still acknowledged when the next is asked for from it, as Spark's
    ``latestOffset(start)`` does."""
    from tests.conftest import wait_until
    out = []

    def enough():
        nonlocal start
        end = capture.next_offset(start, None)
        if end != start:
            out.extend(capture.records(start, end))
            if acknowledge:
                capture.acknowledge(end)
            start = end
        return len(out) >= want
    wait_until(enough, timeout=timeout, interval=0.05, message=f"{want} records")
    return out, start


def stream_until(capture, start, done, acknowledge: bool = True, timeout: float = 30) -> tuple[list, object]:
    """A capture's records from ``start`` until ``done(records)`` holds, or ``done`` records came
    when it is a number; each batch acknowledged (as after Spark's commit) unless not
    ``acknowledge``. Returns (records, the offset after them)."""
    from tests.conftest import wait_until
    records = []
    enough = done if callable(done) else (lambda got: len(got) >= done)

    def poll():
        nonlocal start
        end = capture.next_offset(start, None)
        if end != start:
            records.extend(r for r, _ in capture.records(start, end))
            if acknowledge:
                capture.acknowledge(end)
            start = end
        return enough(records)
    wait_until(poll, timeout=timeout, interval=0.05, message=f"{done} records")
    return records, start


def stream_records(capture, start, done, timeout: float = 30) -> list:
    """:func:`stream_until`'s records, each batch acknowledged."""
    return stream_until(capture, start, done, timeout=timeout)[0]


def record_ids(records) -> list[int]:
    """The ``id`` key of each (record, headers) pair that is not a tombstone."""
    import json
    return [json.loads(r.key)["payload"]["id"] for r, _ in records if r.value is not None]


@pytest.fixture(scope="session")
def postgres():
    from spark_source.postgres.embedded import EmbeddedPostgres
    server = EmbeddedPostgres().start()
    yield server
    server.stop()


@pytest.fixture
def pg_db(postgres):
    yield from own_database(postgres, "test")


def fold_changes(records) -> dict:
    """The table a sink would hold after applying CDC records: (key, value, headers) triples, each
    header list of (name, bytes), folded per key in (commit LSN, order) order. Returns
    {key payload as JSON text: the row (the ``after`` payload)}."""
    import json

    def header(headers, name):
        return int(dict((h[0], h[1]) for h in headers)[name])

    ordered = sorted(records, key=lambda r: (header(r[2], "riverlog.cdc.commit_lsn"), header(r[2], "riverlog.cdc.order")))
    table: dict = {}
    for key, value, _headers in ordered:
        if value is None:
            continue
        payload = json.loads(value)
        payload = payload.get("payload", payload)
        k = json.dumps(json.loads(key).get("payload"), sort_keys=True)
        if payload["op"] == "d":
            table.pop(k, None)
        else:
            table[k] = payload["after"]
    return table
