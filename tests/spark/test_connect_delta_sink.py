"""The ``DeltaSink`` connector through a real broker, a real Worker and real Delta tables (read back
with ``deltalake``): Debezium change records of ``shop.public.customers`` (inserts, updates with
unchanged TOAST values, deletes + tombstones, primary-key changes, in transactions) applied as an
SCD-1 mirror and an SCD-2 history equal to the reference model; records the sink cannot apply
dead-lettered at stage TASK_PUT under ``errors.tolerance=all`` while the rest reach the table, and
the connector FAILED naming the record under ``none``; and a worker SIGKILLed between a batch's
Delta commit and its consumer-group commit, restarted: the table is exact and the Delta log holds
one version per batch."""
from __future__ import annotations

import datetime as dt
import glob
import json
import os
import random
import signal
import subprocess
import sys

import pytest
from deltalake import DeltaTable

from broker.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from tests.conftest import ROOT, wait_until
from tests.delta_cdc import Events, random_history, records_of, reference_history
from tests.spark.connect_helpers import read_committed
from tests.spark.connect_worker_process import GROUP

pytestmark = [pytest.mark.spark, pytest.mark.integration]

TOPIC = "shop.public.customers"
UTC = dt.timezone.utc
SCRIPT = os.path.join(ROOT, "tests", "spark", "connect_worker_process.py")


# ------------------------------------------------------------------------------ helpers
def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        for future in admin.create_topics([NewTopic(topic, 1)]).values():
            future.result(30)
    finally:
        admin.close()


def produce_records(bootstrap: str, records: list[dict]) -> None:
    """Kafka-shaped dicts of :class:`tests.delta_cdc.Events` (their offsets are the topic's: one
    partition, one producer)."""
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for r in records:
        p.produce(r["topic"], value=r["value"], key=r["key"],
                  headers=[(h["key"], h["value"]) for h in r["headers"]] or None)
    assert p.flush(30) == 0
    p.close(1)


def own_broker(broker_factory) -> str:
    """A broker of the test's own: every test here uses Debezium's topic name."""
    return broker_factory({"group.min.session.timeout.ms": 300}).bootstrap


def committed(bootstrap: str, connector: str, topic: str = TOPIC) -> int:
    """The consumer group ``connect-<connector>``'s committed offset of partition 0 (-1: none)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"connect-{connector}", "enable.auto.commit": False})
    try:
        return c.committed([TopicPartition(topic, 0)], timeout=30)[0].offset
    finally:
        c.close()


def rows(path: str, order=("id",)) -> list[dict]:
    return sorted(DeltaTable(path).to_pyarrow_table().to_pylist(), key=lambda r: tuple(r[c] for c in order))


def mirror(path: str) -> dict:
    return {r["id"]: r for r in rows(path)}


def history(path: str) -> dict:
    """The SCD-2 table in :func:`tests.delta_cdc.reference_history`'s shape."""
    def ms(t):
        return None if t is None else (t - dt.datetime(1970, 1, 1, tzinfo=UTC)) // dt.timedelta(milliseconds=1)
    got: dict[int, list] = {}
    for r in rows(path, order=("__lsn", "__order")):
        got.setdefault(r["id"], []).append((r["__op"], {c: r[c] for c in ("id", "name", "note")}, r["__lsn"],
                                            r["__order"], ms(r["__valid_from"]), ms(r["__valid_to"]), r["__is_current"]))
    return got


def delta_commits(path: str) -> list[dict]:
    """Each Delta log entry's ``txn`` (appId, version) and operation, in version order."""
    out = []
    for name in sorted(glob.glob(os.path.join(path, "_delta_log", "*.json"))):
        with open(name) as f:
            actions = [json.loads(line) for line in f if line.strip()]
        txn = next((a["txn"] for a in actions if "txn" in a), None)
        info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        out.append({"version": int(os.path.basename(name)[:-5]), "operation": info.get("operation"),
                    "txn": (txn["appId"], txn["version"]) if txn else None})
    return out


# ------------------------------------------------------------------------------ in one worker
def test_scd1_mirror_scd2_history_and_dead_letters(spark, spark_broker, tmp_path):
    """Four DeltaSink connectors side by side in one worker (their query start-ups overlap)."""
    from connect import Worker
    bootstrap, lake = spark_broker.bootstrap, str(tmp_path / "lake")
    txns, final = random_history(random.Random(11), keys=6, steps=40)
    assert {op for _, changes in txns for op, *_ in changes} >= {"c", "u", "d", "t"}
    records = records_of(Events(), txns)
    half = len(records) // 2
    accounts = Events("public.accounts", topic="shop.public.accounts")
    good = [accounts.change("c", after={"id": i, "name": f"a{i}", "note": None}, lsn=10 + i) for i in range(3)]
    not_json = dict(accounts.change("c", after={"id": 90, "name": "x", "note": None}, lsn=20), value=b"{not json")
    no_key = accounts.change("c", after={"id": None, "name": "no key", "note": None}, lsn=21)
    wrong_type = accounts.change("c", after={"id": "abc", "name": "wrong", "note": None}, lsn=22)
    more = [accounts.change("c", after={"id": i, "name": f"a{i}", "note": None}, lsn=30 + i) for i in range(3, 6)]
    poison = [not_json, no_key, wrong_type]
    for topic in (TOPIC, "shop.public.accounts"):
        create_topic(bootstrap, topic)
    produce_records(bootstrap, records[:half] + good + poison + more)

    w = Worker(spark, {"bootstrap.servers": bootstrap, "group.id": "connect-delta",
                       "state.dir": str(tmp_path / "state")}).start()
    try:
        customers = {"connector.class": "DeltaSink", "topics": TOPIC, "primary.key.fields": "id"}
        w.create_connector("customers-mirror", {**customers, "delta.table.path": f"{lake}/mirror", "scd.type": "1"})
        w.create_connector("customers-history", {**customers, "delta.table.path": f"{lake}/history",
                                                 "scd.type": "2"})
        w.create_connector("accounts-tolerant", {
            "connector.class": "io.riverlog.connect.delta.DeltaSinkConnector", "topics": "shop.public.accounts",
            "delta.root.path": f"{lake}/root", "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": "dlq.accounts",
            "errors.deadletterqueue.context.headers.enable": "true"})
        w.create_connector("accounts-strict", {"connector.class": "DeltaSink", "topics": "shop.public.accounts",
                                               "delta.table.path": f"{lake}/strict"})
        wait_until(lambda: committed(bootstrap, "customers-mirror") >= half, 180, 0.3, "the first half applied")
        produce_records(bootstrap, records[half:])
        for name in ("customers-mirror", "customers-history"):
            wait_until(lambda: committed(bootstrap, name) == len(records), 120, 0.3, f"{name} at the end")

        # SCD 1: the table is the source table; SCD 2: every version with its validity.
        assert {k: {c: r[c] for c in ("id", "name", "note")} for k, r in mirror(f"{lake}/mirror").items()} == final
        assert history(f"{lake}/history") == reference_history(txns)
        for name, path in (("customers-mirror", "mirror"), ("customers-history", "history")):
            app_ids = {c["txn"][0] for c in delta_commits(f"{lake}/{path}") if c["txn"]}
            assert len(app_ids) == 1 and app_ids.pop().startswith(f"connect-{name}.")

        # errors.tolerance=all: the three poison records dead-lettered (TASK_PUT), the others applied.
        dlq = wait_until(lambda: len(read_committed(bootstrap, "dlq.accounts")) >= 3 and
                         read_committed(bootstrap, "dlq.accounts"), 60, 0.3, "the dead letters")
        dlq.sort(key=lambda m: int(dict(m.headers())["__connect.errors.offset"]))   # the join's order is Spark's
        assert [(m.key(), m.value()) for m in dlq] == [(r["key"], r["value"]) for r in poison]
        for m, record in zip(dlq, poison):
            h = {k: v.decode() for k, v in m.headers()}
            assert (h["__connect.errors.stage"], h["__connect.errors.topic"], h["__connect.errors.partition"],
                    h["__connect.errors.offset"]) == ("TASK_PUT", "shop.public.accounts", "0", str(record["offset"]))
            assert h["__connect.errors.class.name"] == "io.riverlog.connect.delta.DeltaSinkConnector"
            assert h["__connect.errors.connector.name"] == "accounts-tolerant"
            assert h["riverlog.cdc.commit_lsn"] == {x["key"]: x["value"] for x in record["headers"]}[
                "riverlog.cdc.commit_lsn"].decode()   # the record's own headers kept
        assert "not JSON" in dict(dlq[0].headers())["__connect.errors.exception.message"].decode()
        wait_until(lambda: committed(bootstrap, "accounts-tolerant", "shop.public.accounts") == 9, 60, 0.3,
                   "the tolerant connector's offsets")
        assert sorted(mirror(f"{lake}/root/public.accounts")) == [0, 1, 2, 3, 4, 5]

        # errors.tolerance=none: FAILED, naming the first record it could not apply; nothing committed.
        status = w.wait_for_state("accounts-strict", "FAILED", 120)
        trace = status["tasks"][0].get("trace") or status["connector"].get("trace") or ""
        assert "topic 'shop.public.accounts' partition 0 offset 3" in trace and "TASK_PUT" in trace, trace
        assert committed(bootstrap, "accounts-strict", "shop.public.accounts") < 3
        strict = f"{lake}/strict"
        assert not os.path.exists(strict) or sorted(mirror(strict)) == [0, 1, 2]
    finally:
        w.close()


# ------------------------------------------------------------------------------ the kill point
def _start(bootstrap: str, state, connectors: list, env: dict | None = None):
    logs = glob.glob(os.path.join(os.path.dirname(state), "worker-*.log"))
    log = open(os.path.join(os.path.dirname(state), f"worker-{len(logs)}.log"), "w")
    return subprocess.Popen([sys.executable, SCRIPT, bootstrap, str(state), json.dumps(connectors)], cwd=ROOT,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                            env={**os.environ, **(env or {})})


def _kill(proc) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_sigkill_between_the_delta_commit_and_the_group_commit(spark, broker_factory, tmp_path):
    """The worker kills itself (``RIVERLOG_CRASH_AT=before_group_commit:0``) after batch 0 is in
    Delta and before the consumer group moved; restarted, it replays batch 0 as a no-op that still
    returns its dead letter: a record without a Connect schema whose value does not fit its column,
    which the lost group-commit transaction was to write to the DLQ. The restarted worker is not
    killed: it runs in the test's session (a cold JVM's start is most of a short life), picking the
    connector up from the connect topics and its checkpoint."""
    from connect import Worker
    bootstrap, state, lake = own_broker(broker_factory), tmp_path / "state", str(tmp_path / "lake")
    txns, final = random_history(random.Random(23), keys=6, steps=30)
    records = records_of(Events(), txns)
    lsn = txns[len(txns) // 2][0]   # batch 0 ends with a whole transaction, then the record that does not fit
    half = sum(1 for r in records if int(r["headers"][0]["value"]) <= lsn)
    unfit = Events(with_schema=False).change("c", after={"id": 99, "name": {"not": "a string"}, "note": None},
                                             lsn=lsn, order=99)
    create_topic(bootstrap, TOPIC)
    produce_records(bootstrap, records[:half] + [unfit])
    name = "customers-to-delta"
    connectors = [{"name": name, "config": {"connector.class": "DeltaSink", "topics": TOPIC,
                                            "delta.table.path": lake, "primary.key.fields": "id", "scd.type": "2",
                                            "errors.tolerance": "all",
                                            "errors.deadletterqueue.topic.name": "dlq.customers"}}]
    proc = _start(bootstrap, state, connectors, {"RIVERLOG_CRASH_AT": "before_group_commit:0"})
    try:
        assert proc.wait(240) == -signal.SIGKILL, "the worker did not reach the crash point"
        first = [c for c in delta_commits(lake) if c["txn"]]
        assert [c["txn"][1] for c in first] == [0], first            # batch 0 is in Delta ...
        assert committed(bootstrap, name) <= 0                          # ... the group still at its start

        # checkpoint kept: batch 0 replayed
        worker = Worker(spark, {"bootstrap.servers": bootstrap, "group.id": GROUP, "state.dir": str(state)}).start()
        try:
            assert worker.connectors() == [name]                        # from the connect topics
            wait_until(lambda: committed(bootstrap, name) == half + 1, 180, 0.3, "batch 0's group commit")
            assert [(m.key(), m.value()) for m in read_committed(bootstrap, "dlq.customers")] == [
                (unfit["key"], unfit["value"])]                         # the replay's dead letter
            produce_records(bootstrap, records[half:])
            wait_until(lambda: committed(bootstrap, name) == len(records) + 1, 180, 0.3, "every record applied")
        finally:
            worker.close()

        assert history(lake) == reference_history(txns)
        assert {r["id"]: {c: r[c] for c in ("id", "name", "note")} for r in rows(lake) if r["__is_current"]} == final
        commits = [c for c in delta_commits(lake) if c["txn"]]
        txn_ids = [c["txn"] for c in commits]
        assert len({a for a, _ in txn_ids}) == 1 and txn_ids[0][0].startswith(f"connect-{name}.")
        versions = [v for _, v in txn_ids]
        assert versions == sorted(set(versions)), f"a batch committed twice: {commits}"
        assert len(commits) >= 2 and versions[0] == 0
    finally:
        _kill(proc)


# ------------------------------------------------------------------------------ end to end
def test_postgres_to_delta_through_the_broker(spark, broker_factory, pg_db, tmp_path):
    """The issue's two configs: PostgresCdcSource → shop.public.customers → DeltaSink (SCD 2, DLQ);
    the Delta table's current rows equal the PostgreSQL table after a snapshot and streamed
    inserts, updates, deletes and a primary-key change, and its history holds every version."""
    from connect import Worker
    bootstrap, lake = own_broker(broker_factory), str(tmp_path / "lake")
    pg_db.execute("CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, qty int)")
    pg_db.execute("INSERT INTO customers VALUES (1, 'ann', 1), (2, 'bob', 2), (3, 'cy', 3)")
    server = pg_db.server
    source = {"connector.class": "PostgresCdcSource", "database.hostname": server.host,
              "database.port": str(server.port), "database.user": server.user, "database.dbname": pg_db.dbname,
              "topic.prefix": "shop", "table.include.list": "public.customers", "slot.name": "shop",
              "publication.autocreate.mode": "filtered", "snapshot.mode": "initial", "heartbeat.interval.ms": "0"}
    sink = {"connector.class": "DeltaSink", "topics": TOPIC, "delta.table.path": f"{lake}/customers",
            "primary.key.fields": "id", "scd.type": "2", "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": "dlq.customers"}

    def postgres_rows() -> dict:
        return {i: {"id": i, "name": n, "qty": q} for i, n, q in pg_db.execute("SELECT id, name, qty FROM customers")}

    def delta_current() -> dict:
        if not os.path.exists(f"{lake}/customers/_delta_log"):
            return {}
        return {r["id"]: {c: r[c] for c in ("id", "name", "qty")} for r in rows(f"{lake}/customers")
                if r["__is_current"]}

    w = Worker(spark, {"bootstrap.servers": bootstrap, "group.id": "connect-pg-delta",
                       "state.dir": str(tmp_path / "state")}).start()
    try:
        w.create_connector("shop-cdc", source)
        w.create_connector("customers-to-delta", sink)
        wait_until(lambda: delta_current() == postgres_rows(), 120, 0.5, "the snapshot in Delta")
        pg_db.execute("INSERT INTO customers VALUES (4, 'dee', 4)")
        with pg_db.connect(autocommit=False) as conn, conn.cursor() as cur:   # one transaction, three changes
            cur.execute("UPDATE customers SET qty = 10 WHERE id = 1")
            cur.execute("DELETE FROM customers WHERE id = 2")
            cur.execute("UPDATE customers SET id = 7 WHERE id = 3")          # delete 3 + tombstone + create 7
            conn.commit()
        pg_db.execute("UPDATE customers SET name = 'anne' WHERE id = 1")
        wait_until(lambda: delta_current() == postgres_rows(), 120, 0.5, "the streamed changes in Delta")
        assert sorted(postgres_rows()) == [1, 4, 7]
        versions = [(r["id"], r["__op"], r["name"], r["qty"], r["__is_current"])
                    for r in rows(f"{lake}/customers", order=("id", "__lsn", "__order"))]
        assert versions == [(1, "r", "ann", 1, False), (1, "u", "ann", 10, False), (1, "u", "anne", 10, True),
                            (2, "r", "bob", 2, False), (2, "d", "bob", 2, False),
                            (3, "r", "cy", 3, False), (3, "d", "cy", 3, False),
                            (4, "c", "dee", 4, True), (7, "c", "cy", 3, True)]
        assert read_committed(bootstrap, "dlq.customers") == []
        w.delete_connector("shop-cdc")
    finally:
        w.close()
