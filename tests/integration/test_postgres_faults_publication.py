"""The publication changing under a live stream, against a real embedded PostgreSQL.

PostgreSQL (18) streams nothing for a publication that is missing, without an error: a query
that went on would acknowledge past the changes. It fails with ``CDC_PUBLICATION`` instead.
Under ``publication.autocreate.mode=filtered`` a table created while the query runs is published
only when the query starts again (as Debezium's connector updates its publication at start), and
that start warns that the rows it got before are not in the stream."""
from __future__ import annotations

import json
import logging

import pytest

from spark_source.postgres.capture import Capture, CdcOffset
from spark_source.postgres.errors import PublicationError
from spark_source.postgres.options import CdcOptions
from tests.conftest import wait_until
from tests.postgres_fixture import read_batches

pytestmark = pytest.mark.integration


def _ids(records) -> list:
    return [(r.topic.rsplit(".", 1)[1], json.loads(r.key)["payload"]["id"]) for r, _ in records if r.value]


def test_a_publication_dropped_while_streaming_fails_the_query_before_its_offsets_move_past(pg_db):
    pg_db.execute("CREATE TABLE t (id int PRIMARY KEY)")
    capture = Capture(CdcOptions.parse(pg_db.options(slot_name="pub", snapshot_mode="no_data",
                                                     heartbeat_interval_ms="50")))
    try:
        start = capture.initial_offset()
        pg_db.execute("INSERT INTO t VALUES (1)")
        first, start = read_batches(capture, start, 1, acknowledge=True)
        pg_db.execute("DROP PUBLICATION riverlog_publication")
        pg_db.execute("INSERT INTO t VALUES (2)")          # never streamed: nothing publishes it
        with pytest.raises(PublicationError, match="was dropped while the query ran"):
            wait_until(lambda: capture.next_offset(start, None) and False, timeout=30)
    finally:
        capture.close()
    assert _ids(first) == [("t", 1)]


def test_filtered_publishes_a_table_created_mid_stream_when_the_query_starts_again(pg_db, caplog):
    pg_db.execute("CREATE TABLE t (id int PRIMARY KEY)")
    options = CdcOptions.parse(pg_db.options(slot_name="filt", snapshot_mode="no_data",
                                             publication_autocreate_mode="filtered",
                                             table_include_list=r"public\..*"))
    capture = Capture(options)
    try:
        start = capture.initial_offset()
        pg_db.execute("CREATE TABLE late (id int PRIMARY KEY)")
        pg_db.execute("INSERT INTO late VALUES (1)")
        pg_db.execute("INSERT INTO t VALUES (1)")
        first, start = read_batches(capture, start, 1, acknowledge=True)
    finally:
        capture.close()
    assert _ids(first) == [("t", 1)], "not published yet: the publication lists the tables the query started with"
    with caplog.at_level(logging.WARNING, logger="spark_source.postgres.slot"):
        capture = Capture(options)
        try:
            start = capture.next_offset(CdcOffset("new", 0), None)
            pg_db.execute("INSERT INTO late VALUES (2)")
            more, _ = read_batches(capture, start, 1, acknowledge=True)
        finally:
            capture.close()
    assert _ids(more) == [("late", 2)]
    assert any("public.late added to publication" in r.getMessage() for r in caplog.records)
