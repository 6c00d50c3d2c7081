"""Where a sink puts windowed keys, against Kafka's ``StreamSinkNode`` (a windowed key serializer
gets a ``WindowedStreamPartitioner``) and ``WindowedStreamPartitionerTest``: every window of a key
goes to the partition the default partitioner picks for the inner key's bytes; other keys are
left to the producer (the key's own bytes)."""
from __future__ import annotations

import pytest

from broker.client import murmur2
from streams import Consumed, Produced, Serdes, StreamsBuilder
from streams.record import Windowed
from streams.serdes_windowed import WindowedSerdes, windowed_partition
from streams.testing import TopologyTestDriver
from streams.windows import SessionWindows, TimeWindows

pytestmark = pytest.mark.unit

S = Serdes.String()
OUT_PARTITIONS = 6


def _partitions_of(driver, topic: str) -> dict[int, list]:
    """Each partition's records of ``topic`` as the driver's interpreter holds them."""
    return {p: recs for p, recs in enumerate(driver._interp.topics[topic]) if recs}


def _run(windows, produced=None):
    b = StreamsBuilder()
    counts = b.stream("in", Consumed.with_(S, S)).groupByKey().windowedBy(windows).count()
    counts.toStream().to("out", produced)
    d = TopologyTestDriver(b.build(), {"application.id": "wp"}, partitions={"in": 3, "out": OUT_PARTITIONS})
    src = d.createInputTopic("in", S, S)
    for i in range(4):
        src.pipeInput(f"other-{i}", "x", i)
    for i in range(10):                      # ten windows of one key
        src.pipeInput("user-7", "x", i * 1_000)
    return d


def test_every_window_of_a_key_lands_in_the_partition_of_the_inner_key():
    """Kafka's ``toStream().to(...)`` of a windowed count: the table's key serde is a
    ``TimeWindowedSerde``, so ``StreamSinkNode`` partitions by the inner key."""
    d = _run(TimeWindows.ofSizeWithNoGrace(1_000))
    serde = WindowedSerdes.timeWindowedSerdeFrom(S, 1_000)
    parts = _partitions_of(d, "out")
    by_key: dict[str, set[int]] = {}
    for p, recs in parts.items():
        for kb, _, _, _ in recs:
            by_key.setdefault(serde.deserialize(kb).key, set()).add(p)
    assert by_key["user-7"] == {murmur2(b"user-7", OUT_PARTITIONS)}
    assert sum(len(r) for r in parts.values()) == 14     # ten windows of user-7, one of each other key
    for i in range(4):
        assert by_key[f"other-{i}"] == {murmur2(f"other-{i}".encode(), OUT_PARTITIONS)}


def test_session_windowed_keys_are_partitioned_by_the_inner_key_too():
    d = _run(SessionWindows.ofInactivityGapWithNoGrace(10))
    serde = WindowedSerdes.sessionWindowedSerdeFrom(S)
    for p, recs in _partitions_of(d, "out").items():
        for kb, _, _, _ in recs:
            assert p == murmur2(serde.deserialize(kb).key.encode(), OUT_PARTITIONS)


def test_a_produced_windowed_serde_on_a_stream_partitions_by_the_inner_key():
    """``StreamSinkNode`` looks at the sink's key serializer, whatever made the keys windowed: a
    stream read with a windowed serde and written with one (Produced, else the stream's)."""
    serde = WindowedSerdes.timeWindowedSerdeFrom(S, 100)
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(serde, S)).filter(lambda k, v: True).to("out", Produced.with_(serde, S))
    d = TopologyTestDriver(b.build(), {"application.id": "wp"}, partitions={"out": OUT_PARTITIONS})
    src = d.createInputTopic("in", serde, S)
    for start in range(0, 1_000, 100):
        src.pipeInput(Windowed("k", start, start + 100), "v", start)
    parts = _partitions_of(d, "out")
    assert list(parts) == [murmur2(b"k", OUT_PARTITIONS)]
    assert len(parts[murmur2(b"k", OUT_PARTITIONS)]) == 10


def test_plain_keys_are_left_to_the_producer():
    """A non-windowed key serde keeps Kafka's default: no partition chosen by the sink, the
    producer hashes the serialized key (the driver as the default partitioner does)."""
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(S, S)).groupByKey().count().toStream().to("out", Produced.with_(S, Serdes.Long()))
    d = TopologyTestDriver(b.build(), {"application.id": "wp"}, partitions={"in": 2, "out": OUT_PARTITIONS})
    src = d.createInputTopic("in", S, S)
    for key in ("k1", "k2", "k3", "k4"):
        src.pipeInput(key, "v", 0)
    assert {p: [S.deserialize(kb) for kb, _, _, _ in recs] for p, recs in _partitions_of(d, "out").items()} == \
        {p: [k for k in ("k1", "k2", "k3", "k4") if murmur2(k.encode(), OUT_PARTITIONS) == p]
         for p in {murmur2(k.encode(), OUT_PARTITIONS) for k in ("k1", "k2", "k3", "k4")}}


def test_windowed_partition_is_the_inner_keys_default_partition():
    """WindowedStreamPartitionerTest.testCopartitioning: for every key and window, the windowed
    partition equals the default partitioner's for the inner key's bytes."""
    serde = WindowedSerdes.timeWindowedSerdeFrom(Serdes.Integer(), 10)
    for key in range(100):
        expected = murmur2(Serdes.Integer().serialize(key), 10)
        for start in (0, 10, 1_000_000):
            assert windowed_partition(serde, Windowed(key, start, start + 10), "t", 10) == expected


def test_a_spark_task_partitions_windowed_keys_by_the_output_topics_partition_count(tmp_path):
    """What a stateless sub-topology runs on Spark's executors (``mapInArrow``): the task asks
    the cluster for the output topic's partition count (once per task, not per record) and gives
    each windowed record the inner key's partition; a topic that does not exist fails as Kafka's
    ``RecordCollectorImpl`` does."""
    import pyarrow as pa

    from broker.client import AdminClient, NewTopic
    from broker.embedded import EmbeddedBroker
    from streams.errors import StreamsError
    from streams.interpreter import task_policy
    from streams.spark_task import stateless_batches

    serde = WindowedSerdes.timeWindowedSerdeFrom(S, 100)

    def run(servers, out):
        b = StreamsBuilder()
        b.stream("in", Consumed.with_(serde, S)).mapValues(lambda v: v.upper()).to(out)
        rows = [{"topic": "in", "partition": 0, "offset": i, "key": serde.serialize(Windowed(k, i * 100, i * 100 + 100)),
                 "value": b"v", "timestamp": i, "headers": []} for i, k in enumerate(["a", "b", "a", "c", "a", "b"])]
        fn = stateless_batches(b.build(), 0, "wp", (None, None), None, task_policy({"bootstrap.servers": servers}))
        return [r for batch in fn(iter([pa.RecordBatch.from_pylist(rows)])) for r in batch.to_pylist()]

    with EmbeddedBroker(data_dir=str(tmp_path), config={"auto.create.topics.enable": "false"}) as broker:
        servers = broker.bootstrap_servers
        admin = AdminClient({"bootstrap.servers": servers})
        admin.create_topics([NewTopic("wp-out", OUT_PARTITIONS)])["wp-out"].result(30)
        admin.close()
        got = [(serde.deserialize(r["key"]).key, r["partition"]) for r in run(servers, "wp-out")]
        assert got == [(k, murmur2(k.encode(), OUT_PARTITIONS)) for k in ["a", "b", "a", "c", "a", "b"]]
        with pytest.raises(StreamsError, match="partition information for topic missing"):
            run(servers, "missing")
