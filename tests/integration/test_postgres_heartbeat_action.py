"""Debezium 2.7's ``heartbeat.action.query`` (RecordsStreamProducerIT.testHeartbeatActionQueryExecuted),
against a real embedded PostgreSQL: the query runs with each heartbeat; a failing one is logged
and the stream goes on."""
from __future__ import annotations

import json

import pytest

from spark_source.postgres.capture import Capture, CdcOffset
from spark_source.postgres.options import CdcOptions
from tests.postgres_fixture import stream_records

pytestmark = pytest.mark.integration


def test_the_heartbeat_action_query_runs_with_the_heartbeats(pg_db):
    pg_db.execute("CREATE TABLE test_table (id SERIAL PRIMARY KEY, text TEXT);"
                  "CREATE TABLE test_heartbeat_table (text TEXT)")
    capture = Capture(CdcOptions.parse(pg_db.options(
        snapshot_mode="no_data", heartbeat_interval_ms="100",
        heartbeat_action_query="INSERT INTO test_heartbeat_table (text) VALUES ('test_heartbeat');")))
    try:
        start = capture.next_offset(CdcOffset("new", 0), None)
        pg_db.execute("INSERT INTO test_table (text) VALUES ('mydata')")
        beats = lambda: pg_db.execute("SELECT count(*) FROM test_heartbeat_table")[0][0]  # noqa: E731
        records = stream_records(capture, start, lambda got: got and beats() >= 2)
    finally:
        capture.close()
    mine = [json.loads(r.value)["payload"]["after"] for r in records if r.topic == "shop.public.test_table"]
    assert mine == [{"id": 1, "text": "mydata"}]
    # the action query's own inserts are changes of a captured table, as with Debezium
    assert {r.topic for r in records} <= {"shop.public.test_table", "shop.public.test_heartbeat_table"}


def test_a_failing_heartbeat_action_query_is_logged_and_the_stream_goes_on(pg_db, caplog):
    pg_db.execute("CREATE TABLE test_table (id SERIAL PRIMARY KEY, text TEXT)")
    capture = Capture(CdcOptions.parse(pg_db.options(snapshot_mode="no_data", heartbeat_interval_ms="100",
                                                     heartbeat_action_query="INSERT INTO missing VALUES (1)")))
    try:
        start = capture.next_offset(CdcOffset("new", 0), None)
        inserted = []

        def done(got):
            if not inserted and any("heartbeat.action.query" in m for m in caplog.messages):
                inserted.append(pg_db.execute("INSERT INTO test_table (text) VALUES ('after the failure')"))
            return any(json.loads(r.value)["payload"]["after"]["text"] == "after the failure" for r in got)
        stream_records(capture, start, done)
    finally:
        capture.close()


def test_the_connector_takes_heartbeat_action_query():
    import connect.postgres_cdc_source  # noqa: F401  (registers the connector)
    from connect.plugins import check_connector_config
    config = {"connector.class": "PostgresCdcSource", "database.hostname": "127.0.0.1", "database.dbname": "shop",
              "topic.prefix": "shop", "slot.name": "shop", "heartbeat.action.query": "UPDATE hb SET ts = now()"}
    assert check_connector_config("shop-cdc", config)["heartbeat.action.query"] == "UPDATE hb SET ts = now()"
