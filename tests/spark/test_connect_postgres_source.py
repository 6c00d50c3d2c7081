"""PostgresCdcSource through the real Worker, against a real embedded PostgreSQL, a real broker and
real Spark: a Debezium-style config snapshots a table and streams inserts, updates and deletes to
``shop.public.customers`` exactly as PostgreSQL made them (key = the primary key, a tombstone after
each delete, nothing twice, read with ``read_committed``); connect-offsets holds Debezium's offset
with the LSN; a stopped and resumed connector goes on from its checkpoint, and one whose
checkpoint was dropped (offsets altered while stopped) goes on from connect-offsets, without
snapshotting again or repeating a change. The value converter is JsonConverter with
``schemas.enable=false`` and the key's is left at Kafka's default: payload-only values, enveloped keys."""
from __future__ import annotations

import json

import pytest

from tests.conftest import wait_until
from tests.spark.connect_helpers import read_committed

pytestmark = [pytest.mark.spark, pytest.mark.integration]
TOPIC = "shop.public.customers"


def _changes(bootstrap: str) -> list[tuple]:
    """(key id, op, before's id, after, commit LSN, order, source) per record; op None for a tombstone."""
    out = []
    for m in read_committed(bootstrap, TOPIC):
        key = json.loads(m.key())
        assert set(key) == {"schema", "payload"}, "the key keeps its schema (key.converter schemas.enable=true)"
        headers = {k: int(v) for k, v in (m.headers() or [])}
        lsn, order = headers["riverlog.cdc.commit_lsn"], headers["riverlog.cdc.order"]
        if m.value() is None:
            out.append((key["payload"]["id"], None, None, None, lsn, order))
            continue
        value = json.loads(m.value())
        assert "schema" not in value, "value.converter.schemas.enable=false: the payload alone"
        before = value["before"] and value["before"]["id"]  # DEFAULT replica identity: the key is what is sure
        out.append((key["payload"]["id"], value["op"], before, value["after"], lsn, order, value["source"]))
    return out


def _ops(changes) -> list[tuple]:
    return [c[:4] for c in changes]


def _row(i, name, qty):
    return {"id": i, "name": name, "qty": qty}


def test_snapshot_stream_offsets_stop_resume_and_resume_from_connect_offsets(spark, spark_broker, pg_db, tmp_path):
    from connect import Worker
    bootstrap = spark_broker.bootstrap
    pg_db.execute("CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, qty int)")
    pg_db.execute("INSERT INTO customers VALUES (1, 'ann', 1), (2, 'bob', 2), (3, 'cy', 3)")
    server = pg_db.server
    config = {"connector.class": "PostgresCdcSource", "database.hostname": server.host,
              "database.port": str(server.port), "database.user": server.user, "database.dbname": pg_db.dbname,
              "topic.prefix": "shop", "table.include.list": "public.customers", "slot.name": "shop",
              "publication.autocreate.mode": "filtered", "snapshot.mode": "initial", "plugin.name": "pgoutput",
              "heartbeat.interval.ms": "0", "value.converter": "org.apache.kafka.connect.json.JsonConverter",
              "value.converter.schemas.enable": "false"}
    w = Worker(spark, {"bootstrap.servers": bootstrap, "group.id": "connect-pg", "state.dir": str(tmp_path)}).start()
    try:
        info = w.create_connector("shop-cdc", config)
        assert info["type"] == "source" and len(info["tasks"]) == 1
        w.wait_for_state("shop-cdc", "RUNNING")
        snapshot = [(1, "r", None, _row(1, "ann", 1)), (2, "r", None, _row(2, "bob", 2)),
                    (3, "r", None, _row(3, "cy", 3))]
        wait_until(lambda: _ops(_changes(bootstrap)) == snapshot, 90, 0.5, "the snapshot")
        assert [c[6]["snapshot"] for c in _changes(bootstrap)] == ["first", "true", "last"]   # Debezium 2.7

        pg_db.execute("INSERT INTO customers VALUES (4, 'dee', 4)")
        with pg_db.connect(autocommit=False) as conn, conn.cursor() as cur:  # one transaction, two changes
            cur.execute("UPDATE customers SET qty = 10 WHERE id = 1")
            cur.execute("DELETE FROM customers WHERE id = 2")
            conn.commit()
        streamed = [(4, "c", None, _row(4, "dee", 4)), (1, "u", None, _row(1, "ann", 10)),
                    (2, "d", 2, None), (2, None, None, None)]
        wait_until(lambda: len(_changes(bootstrap)) >= 7, 90, 0.5, "the streamed changes")
        changes = _changes(bootstrap)
        assert _ops(changes) == snapshot + streamed
        last = changes[-1]
        assert changes[-3][4] == last[4] and [c[5] for c in changes[-3:]] == [0, 1, 2], \
            "update, delete and tombstone share their commit LSN, in transaction order"
        txid = changes[-2][6]["txId"]

        def stored():
            return w.offsets("shop-cdc")["offsets"]
        wait_until(lambda: stored() and stored()[0]["offset"].get("lsn") == last[4], 30, 0.3, "the offset's LSN")
        (entry,) = stored()
        assert entry["partition"] == {"server": "shop"}
        assert entry["offset"]["txId"] == txid and entry["offset"]["lsn_commit"] == last[4]
        assert entry["offset"]["ts_usec"] // 1000 == changes[-2][6]["ts_ms"]

        w.stop("shop-cdc")  # the checkpoint stays: resumed from it
        pg_db.execute("UPDATE customers SET name = 'cyd' WHERE id = 3")
        w.resume("shop-cdc")
        w.wait_for_state("shop-cdc", "RUNNING")
        after_stop = [(3, "u", None, _row(3, "cyd", 3))]
        wait_until(lambda: len(_changes(bootstrap)) >= 8, 90, 0.5, "the change made while stopped")

        w.stop("shop-cdc")  # altering the offsets drops the checkpoint: connect-offsets is the truth
        wait_until(lambda: stored()[0]["offset"]["lsn"] > last[4], 30, 0.3, "the new offset")
        (entry,) = stored()
        w.alter_offsets("shop-cdc", [entry])
        pg_db.execute("INSERT INTO customers VALUES (5, 'eve', 5)")
        w.resume("shop-cdc")
        w.wait_for_state("shop-cdc", "RUNNING")
        wait_until(lambda: len(_changes(bootstrap)) >= 9, 90, 0.5, "the change made before resuming from offsets")
        pg_db.execute("DELETE FROM customers WHERE id = 4")
        wait_until(lambda: len(_changes(bootstrap)) >= 11, 90, 0.5, "a delete after resuming from offsets")
        final = [(5, "c", None, _row(5, "eve", 5)), (4, "d", 4, None), (4, None, None, None)]
        changes = _changes(bootstrap)
        assert _ops(changes) == snapshot + streamed + after_stop + final, "no snapshot again, nothing twice"
        assert len({(c[4], c[5]) for c in changes}) == len(changes)
        w.delete_connector("shop-cdc")
    finally:
        w.close()
