"""TopicCopy keeps each record's partition, as MirrorMaker 2's ``MirrorSourceTask`` does: a missing
target topic is created with its source's partition count, an existing one with fewer partitions is
grown to it (``MirrorSourceConnector.computeAndCreateTopicPartitions``), and the stored offsets are
MirrorMaker's (the last record copied)."""
from __future__ import annotations

import pytest

from tests.conftest import wait_until
from tests.spark.connect_helpers import read_committed

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def _produce_to_partitions(bootstrap: str, topic: str, per_partition: dict[int, list[bytes]]) -> None:
    from broker.client import Producer
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for partition, values in per_partition.items():
        for v in values:
            p.produce(topic, value=v, key=b"same-key", partition=partition)
    assert p.flush(30) == 0
    p.close(1)


def test_copy_keeps_partitions_and_creates_or_grows_the_targets(spark, spark_broker, broker_factory, tmp_path):
    from broker.client import AdminClient, NewTopic
    from connect import Worker
    source, target = spark_broker.bootstrap, broker_factory()
    with AdminClient({"bootstrap.servers": source}) as admin:
        for f in admin.create_topics([NewTopic("parts", 3), NewTopic("grown", 3)]).values():
            f.result(30)
    with AdminClient({"bootstrap.servers": target.bootstrap}) as admin:
        admin.create_topics([NewTopic("west.grown", 1)])["west.grown"].result(30)
    # One key everywhere: a partitioner choosing again would put every copy in one partition.
    records = {0: [b"p0-a", b"p0-b"], 1: [b"p1-a"], 2: [b"p2-a", b"p2-b", b"p2-c"]}
    for topic in ("parts", "grown"):
        _produce_to_partitions(source, topic, {p: [topic.encode() + b"-" + v for v in vs] for p, vs in records.items()})

    w = Worker(spark, {"bootstrap.servers": target.bootstrap, "group.id": "connect-copy-partitions",
                       "state.dir": str(tmp_path / "state")}).start()
    try:
        w.create_connector("copy", {"connector.class": "TopicCopy", "topics": "parts, grown",
                                    "source.cluster.bootstrap.servers": source, "source.cluster.alias": "east",
                                    "transforms": "rename", "transforms.rename.type": "RegexRouter",
                                    "transforms.rename.regex": "(.*)", "transforms.rename.replacement": "west.$1"})
        for topic in ("parts", "grown"):
            copied = wait_until(lambda: len(got := read_committed(target.bootstrap, f"west.{topic}")) == 6 and got,
                                120, 0.3, f"every record of {topic} copied")
            assert {(m.partition(), m.value()) for m in copied} == \
                {(p, topic.encode() + b"-" + v) for p, vs in records.items() for v in vs}, topic
        with AdminClient({"bootstrap.servers": target.bootstrap}) as admin:
            topics = admin.list_topics(timeout=30).topics
            assert len(topics["west.parts"].partitions) == 3 and len(topics["west.grown"].partitions) == 3
        expected = sorted(("east", t, p, len(vs) - 1) for t in ("grown", "parts") for p, vs in records.items())
        wait_until(lambda: sorted((o["partition"]["cluster"], o["partition"]["topic"], o["partition"]["partition"],
                                   o["offset"]["offset"]) for o in w.offsets("copy")["offsets"]) == expected,
                   30, 0.3, "MirrorMaker's offsets: the last record copied")
    finally:
        w.close()
