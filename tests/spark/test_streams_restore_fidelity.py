"""State beyond a table or a window count, across restarts from the broker alone and SIGKILL: a
suppression buffer until window close and one with a time limit that emits early, session windows
that merge, sliding windows emitted on window close (KIP-825), a cogroup, and the stream time that
decides which late records are dropped (``streams_app_process.buffered_topology``, one task).

Kafka Streams gives a suppression buffer its own changelog (``InMemoryTimeOrderedKeyValueChangeBuffer``)
and an emit-on-close processor its last emission time in the commit's metadata
(``AbstractKStreamTimeWindowAggregateProcessor.init``), so a restart neither emits a final result
twice nor loses one. Riverlog's stores, buffers and processor metadata (stream time, last emission)
are rebuilt from their changelogs when the checkpoint is gone, so the committed output of an
application killed mid-batch and restarted from the broker at several points must equal the
reference interpreter's for the whole input, record for record (no record cache: every update is
forwarded, as the driver forwards it)."""
from __future__ import annotations

import shutil

import pytest

from broker.client import Producer
from streams.serdes import Serdes
from streams.testing import TopologyTestDriver
from tests.spark import streams_app_process as app_process
from tests.spark.child_process import process_available, run_life
from tests.spark.test_streams_faults import broker, make_topics, read_committed  # noqa: F401

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]

S, L = Serdes.String(), Serdes.Long()
BASE = 1_700_000_000_000   # a timestamp of 0 means "now" to a producer


# The input's phases (one before each restart from the broker) and the first life's crash: at
# batch 1 (``maxOffsetsPerTrigger`` 6), decided and not ended, so the next life finishes it and
# starts at record 12.
PHASES, CRASH = (0, 18, 30, 42), "before_end:1"
RESTARTS = (12, 18, 30)     # where a life starts from the broker alone, or its checkpoint (the last)


def history(n: int) -> list[tuple[str, str, int]]:
    """(key, value, timestamp), a record every ~150 ms. Each 6th record (the first of each batch,
    so of each life) is later than every grace: only a restored stream time drops it. Each 5th is
    a little late (within some graces). The record before each restart has a key of its own that
    never comes again: its windows, session and buffered changes can only be emitted by a life
    that restored them."""
    out = []
    for i in range(n):
        ts = BASE + 150 * i + (37 * i) % 90
        if i % 6 == 0 and i:
            ts -= 1_500
        elif i % 5 == 4:
            ts -= 250
        out.append((f"solo{i}" if i + 1 in RESTARTS else f"k{(i * 5) % 3}", "a" if i % 3 else "b", ts))
    return out


def produce(servers: str, topic: str, records) -> None:
    with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
        for k, v, ts in records:
            p.produce(topic, key=S.serialize(k), value=S.serialize(v), timestamp=ts, partition=0)
        assert p.flush(30) == 0


def oracle(tp, source: str, outputs: list[str], records) -> dict[str, list]:
    """Each output of the driver after the whole input in one go, every update forwarded."""
    d = TopologyTestDriver(tp, {"application.id": "oracle", "statestore.cache.max.bytes": 0})
    i = d.createInputTopic(source, S, S)
    for k, v, ts in records:
        i.pipeInput(k, v, ts)
    return {o: [(r.key, r.value, r.timestamp) for r in d.createOutputTopic(o, S, L).readRecordsToList()]
            for o in outputs}


@pytest.mark.timeout(900)
def test_buffers_sessions_and_stream_time_survive_sigkill_and_restarts_from_the_broker(spark, broker, tmp_path):  # noqa: F811
    """Three phases of input. The first life is killed when its second batch's decision is recorded
    and no transaction has ended; its checkpoint is deleted, so the next life finishes that batch
    from the broker and rebuilds every store, buffer and stream time from the changelogs. Before
    each later phase the checkpoint is deleted again, with entries waiting in both buffers, sessions
    open and windows not yet emitted; the last life keeps its checkpoint."""
    servers, state, source, prefix = broker.bootstrap, str(tmp_path / "state"), "rf-events", "rf"
    outputs = [f"{prefix}-{o}" for o in app_process.BUFFERED_OUTPUTS]
    make_topics(servers, [source, *outputs], **{"retention.ms": "-1"})   # records from 2023
    tp = app_process.buffered_topology(source, prefix)
    records = history(PHASES[-1])
    config = app_process.buffered_config(servers, state)

    produce(servers, source, records[PHASES[0]:PHASES[1]])
    run_life([app_process.__file__, "--buffered", servers, state, source, prefix], tmp_path / "life-1.log",
             CRASH, "life 1")
    shutil.rmtree(state)                          # from the broker alone
    process_available(spark, tp, config)
    produce(servers, source, records[PHASES[1]:PHASES[2]])
    shutil.rmtree(state)
    process_available(spark, tp, config)
    produce(servers, source, records[PHASES[2]:PHASES[3]])
    process_available(spark, tp, config)          # from its checkpoint

    want = oracle(tp, source, outputs, records)
    for topic in outputs:
        got = [(S.deserialize(k), L.deserialize(v), ts) for k, v, ts, _ in read_committed(servers, topic)]
        assert got == want[topic], topic
    assert want[f"{prefix}-final"] and want[f"{prefix}-sliding"] and want[f"{prefix}-cogroup"]
    assert want[f"{prefix}-final-table"] == want[f"{prefix}-final"]
