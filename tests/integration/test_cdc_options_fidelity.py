"""Debezium's PostgreSQL connector options (2.7) against a real embedded PostgreSQL (the session's
one server): ``skipped.operations`` on a primary-key change, a mode spelled in capitals, and
``table.exclude.list`` keeping an excluded table out of the snapshot and the stream."""
from __future__ import annotations

import json

import pytest

from spark_source.postgres.capture import Capture
from spark_source.postgres.options import CdcOptions
from tests.integration.test_cdc_debezium_fidelity import _snapshot, _stream

pytestmark = pytest.mark.integration


def _row(record):
    payload = None if record.value is None else json.loads(record.value)["payload"]
    return (record.topic, json.loads(record.key)["payload"] if record.key else None,
            None if payload is None else payload["op"], None if payload is None else payload["after"])


def test_skipped_updates_keep_a_key_change_and_capitals_select_a_mode(pg_db):
    # EventDispatcher filters by each record's own operation: a key change is a DELETE and a CREATE
    # (RelationalChangeRecordEmitter.emitUpdateAsPrimaryKeyChangeRecord), so skipping u keeps it;
    # BinaryHandlingMode.parse ignores case.
    pg_db.execute("CREATE TABLE t (id int PRIMARY KEY, b bytea)")
    pg_db.execute("INSERT INTO t VALUES (1, '\\xfb01')")
    capture = Capture(CdcOptions.parse(pg_db.options(**{"skipped.operations": "u",
                                                         "binary.handling.mode": "HEX"})))
    try:
        snapshot, start = _snapshot(capture)
        assert [_row(r) for r in snapshot] == [("shop.public.t", {"id": 1}, "r", {"id": 1, "b": "fb01"})]
        pg_db.execute("UPDATE t SET id = 2 WHERE id = 1")
        pg_db.execute("UPDATE t SET b = '\\x00' WHERE id = 2")
        pg_db.execute("INSERT INTO t VALUES (3, NULL)")
        records = _stream(capture, start, lambda rs: any(_row(r)[1] == {"id": 3} for r in rs))[0]
    finally:
        capture.close()
    assert [_row(r) for r in records] == [
        ("shop.public.t", {"id": 1}, "d", None),
        ("shop.public.t", {"id": 1}, None, None),
        ("shop.public.t", {"id": 2}, "c", {"id": 2, "b": "fb01"}),
        ("shop.public.t", {"id": 3}, "c", {"id": 3, "b": None})]


def test_an_excluded_table_is_neither_snapshotted_nor_streamed(pg_db):
    # RelationalTableFilters: anchored, case-insensitive regexes on schema.table.
    for table in ("public.secret", 'public."Secret"', "public.secrets", "public.open"):
        pg_db.execute(f"CREATE TABLE {table} (id int PRIMARY KEY)")
        pg_db.execute(f"INSERT INTO {table} VALUES (1)")
    capture = Capture(CdcOptions.parse(pg_db.options(**{"table.exclude.list": "public.secret"})))
    try:
        snapshot, start = _snapshot(capture)
        for table in ("public.secret", 'public."Secret"', "public.secrets", "public.open"):
            pg_db.execute(f"INSERT INTO {table} VALUES (2)")
        records = _stream(capture, start, lambda rs: any(r.topic == "shop.public.open" for r in rs))[0]
    finally:
        capture.close()
    assert sorted(r.topic for r in snapshot) == ["shop.public.open", "shop.public.secrets"]
    assert sorted(r.topic for r in records) == ["shop.public.open", "shop.public.secrets"]
