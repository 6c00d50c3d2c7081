"""Joins killed with SIGKILL at commit points and restarted, exactly once: an application with a
stream–table join and a foreign-key join (``streams_join_app_process.py``, its own process and
SparkSession) dies mid-batch (its transactions open, the decision not recorded), restarts from its
checkpoint, dies between the output write and Spark's checkpoint commit, and restarts with the
checkpoint deleted (from the broker alone: state from the changelogs, inputs from the group's
offsets), in the test's own session. Its committed output must equal the reference interpreter's
for the whole input.

Input arrives in three phases, one before each life, each in timestamp order; without
``maxOffsetsPerTrigger`` a life reads a phase whole, so Spark applies the records in the order the
interpreter is given them (a rate limit would let the orders run ahead of the customers)."""
from __future__ import annotations

import random
import shutil
from collections import Counter

import pytest

from broker.client import Producer
from streams.serdes import Serdes
from streams.testing import TopologyTestDriver
from tests.spark import streams_join_app_process as app_process
from tests.spark.child_process import Life, process_available, start_life
from tests.spark.test_streams_faults import broker, make_topics, read_committed  # noqa: F401

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]

S = Serdes.String()
BASE = 1_700_000_000_000
CUSTOMERS, TIERS = [f"c{i}" for i in range(4)], [f"t{i}" for i in range(3)]


def phases(seed: int = 5, size: int = 14) -> list[list[tuple]]:
    """(input, key, value, ts): unique values; one customer deleted in phase 2 and created again
    later, so the outputs hold no legitimate repeat of a (key, value) pair; no tier is deleted."""
    rnd, ts, out = random.Random(seed), BASE, []
    for n in range(3):
        phase = []
        if n == 0:
            phase += [("tiers", t, f"{t}-v0", (ts := ts + 100)) for t in TIERS[:2]]
        for i in range(size):
            topic = rnd.choice(["orders", "orders", "customers", "customers", "tiers"])
            key = rnd.choice(TIERS if topic == "tiers" else CUSTOMERS)
            value = f"{topic[0]}{n}.{i}" if topic != "customers" else f"{rnd.choice(TIERS)}/{n}.{i}"
            phase.append((topic, key, value, (ts := ts + 100)))
        if n == 1:
            phase.append(("customers", "c1", None, (ts := ts + 100)))
        out.append(phase)
    return out


def oracle(tp, names, records) -> tuple[dict, TopologyTestDriver]:
    d = TopologyTestDriver(tp, {"application.id": "oracle"})
    inputs = {t: d.createInputTopic(names[t], S, S) for t in app_process.INPUTS}
    for t, k, v, ts in records:
        inputs[t].pipeInput(k, v, ts)
    return ({o: [(r.key, r.value, r.timestamp) for r in d.createOutputTopic(names[o], S, S).readRecordsToList()]
             for o in app_process.OUTPUTS}, d)


def by_key(rows) -> dict:
    out: dict = {}
    for k, v, ts in rows:
        out.setdefault(k, []).append((v, ts))
    return out


def start(servers: str, state: str, suffix: str, log_path, crash: str) -> Life:
    """A life killed at ``crash``, in a process of its own started now (its cold start overlaps
    the life before it, whose end it waits for before it touches anything) and let go by ``.run()``."""
    return start_life([app_process.__file__, servers, state, suffix], log_path, crash, log_path.name)


@pytest.mark.timeout(1500)
def test_joins_killed_at_commit_points_restart_exactly_once(spark, broker, tmp_path):  # noqa: F811
    servers, suffix, state = broker.bootstrap, "jf", str(tmp_path / "state")
    names = app_process.topics(suffix)
    make_topics(servers, names.values(), **{"retention.ms": "-1"})   # records from 2023
    lives = [("before_record:1", False), ("before_spark_commit:2", True), (None, False)]
    records: list = []
    killed = [crash for crash, _ in lives if crash is not None]
    ahead = start(servers, state, suffix, tmp_path / "life-0.log", killed[0])
    try:
        with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
            for n, (phase, (crash, lose_checkpoint)) in enumerate(zip(phases(), lives)):
                for t, k, v, ts in phase:
                    p.produce(names[t], key=S.serialize(k), value=S.serialize(v), timestamp=ts, partition=0)
                assert p.flush(30) == 0
                records += phase
                if crash is None:   # the last life, in the test's session (a cold JVM's start is most of it)
                    process_available(spark, app_process.topology(suffix), app_process.config(servers, state, suffix))
                else:
                    life, ahead = ahead, None
                    life.wait_ready()
                    if n + 1 < len(killed):
                        ahead = start(servers, state, suffix, tmp_path / f"life-{n + 1}.log", killed[n + 1])
                    life.run()
                if lose_checkpoint:
                    shutil.rmtree(state)
    finally:
        if ahead is not None:
            ahead.kill()

    expected, driver = oracle(app_process.topology(suffix), names, records)
    got = {o: [(S.deserialize(k), S.deserialize(v), ts) for k, v, ts, _ in read_committed(servers, names[o])]
           for o in app_process.OUTPUTS}
    # the stream–table join: every result once, in each key's order, as the interpreter's
    assert by_key(got["enriched"]) == by_key(expected["enriched"]) and expected["enriched"]
    # the foreign-key join: its intermediate results depend on when answers arrive (Kafka's too: an
    # answer for a row changed since is dropped, a late subscription finds a newer right row and
    # takes that row's timestamp), so the latest result per key must agree, and no (key, result) may
    # be committed more often than the interpreter emits it (tier values are unique and no tier is
    # deleted, so only a replay could add a copy)
    fk, want = got["customer-tiers"], expected["customer-tiers"]
    assert {k: vs[-1][0] for k, vs in by_key(fk).items()} == {k: vs[-1][0] for k, vs in by_key(want).items()}
    extra = Counter((k, v) for k, v, _ in fk) - Counter((k, v) for k, v, _ in want)
    assert not extra, extra
    from streams.app import StreamsApp
    app = StreamsApp(app_process.topology(suffix), None, app_process.config(servers, state, suffix))
    for store in ("customers", "tiers"):
        assert sorted(app.store(store).all()) == sorted(driver.getKeyValueStore(store).all()), store
