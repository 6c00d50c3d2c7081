"""The internal topics an application makes on a real broker, against Kafka Streams'
``InternalTopicManager``: each kind with its ``InternalTopicConfig`` (a window store's changelog
compacted only, where Kafka's is ``compact,delete`` with a wall-clock retention; a versioned table's
with its history and a day as ``min.compaction.lag.ms``; ``topic.*`` settings on all of them), and an existing internal
topic whose partition count is not the topology's refused (``validateTopics``)."""
from __future__ import annotations

import pytest

from broker.client import AdminClient, ConfigResource, NewTopic
from streams import JoinWindows, StreamJoined
from streams.builder import StreamsBuilder
from streams.errors import StreamsError
from streams.joins import TopicsNotCopartitionedError
from streams.parameters import Consumed, Grouped, Materialized, Produced
from streams.serdes import Serdes
from streams.versioned import Stores
from streams.windows import SessionWindows, TimeWindows
from tests.spark.test_sink import make_topic

pytestmark = [pytest.mark.spark, pytest.mark.integration]
S, L = Serdes.String(), Serdes.Long()
C = Consumed.with_(S, S)
DAY = 86_400_000


def _configs(servers: str, topics: list[str]) -> dict[str, dict[str, str]]:
    admin = AdminClient({"bootstrap.servers": servers})
    try:
        futures = admin.describe_configs([ConfigResource("topic", t) for t in topics])
        return {r.name: {k: e.value for k, e in f.result().items()} for r, f in futures.items()}
    finally:
        admin.close()


def _partitions(servers: str) -> dict[str, int]:
    admin = AdminClient({"bootstrap.servers": servers})
    try:
        return {n: len(t.partitions) for n, t in admin.list_topics(timeout=30).topics.items()}
    finally:
        admin.close()


def test_internal_topics_are_made_with_kafkas_configs(spark, spark_broker, tmp_path):
    servers, app_id = spark_broker.bootstrap, "fidelity-configs"
    orders, other, prices = (make_topic(spark_broker, f"{app_id}-{n}", 2) for n in ("orders", "other", "prices"))
    b = StreamsBuilder()
    s = b.stream(orders, C)
    (s.groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(60_000, 10_000)).count(materialized=Materialized.as_("win"))
      .toStream().map(lambda k, v: (k.key, v)).to(f"{app_id}-out1", Produced.with_(S, L)))
    (s.groupByKey().windowedBy(SessionWindows.ofInactivityGapAndGrace(5_000, 1_000))
      .count(materialized=Materialized.as_("sess")).toStream().map(lambda k, v: (k.key, v))
      .to(f"{app_id}-out2", Produced.with_(S, L)))
    (s.groupBy(lambda k, v: v, Grouped.as_("by-value").withKeySerde(S).withValueSerde(S))
      .count(materialized=Materialized.as_("kv")).toStream().to(f"{app_id}-out3", Produced.with_(S, L)))
    versioned = b.table(prices, C, Materialized.as_(Stores.persistentVersionedKeyValueStore("ver", 3_600_000)))
    s.join(versioned, lambda a, c: a + c).to(f"{app_id}-out4", Produced.with_(S, S))
    s.leftJoin(b.stream(other, C), lambda a, c: a, JoinWindows.ofTimeDifferenceAndGrace(5_000, 2_000),
               StreamJoined.with_(S, S, S).withStoreName("j")).to(f"{app_id}-out5", Produced.with_(S, S))
    app = b.build(spark, {"application.id": app_id, "bootstrap.servers": servers, "state.dir": str(tmp_path),
                          "topic.min.insync.replicas": "1", "topic.segment.ms": "3600000"})
    app.start()
    app.close()
    got = _configs(servers, [f"{app_id}-{t}" for t in (
        "by-value-repartition", "kv-changelog", "win-changelog", "sess-changelog", "ver-changelog",
        "j-this-join-store-changelog", "j-left-shared-join-store-changelog")])
    pick = ("cleanup.policy", "retention.ms", "min.compaction.lag.ms", "segment.bytes", "segment.ms",
            "min.insync.replicas", "message.timestamp.type")
    got = {t[len(app_id) + 1:]: {k: c[k] for k in pick} for t, c in got.items()}
    common = {"segment.ms": "3600000", "min.insync.replicas": "1", "message.timestamp.type": "CreateTime",
              "segment.bytes": "1073741824", "min.compaction.lag.ms": "0"}
    week = got["kv-changelog"]["retention.ms"]     # the broker's log.retention.ms: compacted only
    assert got == {
        "by-value-repartition": {**common, "cleanup.policy": "delete", "retention.ms": "-1",
                                 "segment.bytes": "52428800"},
        "kv-changelog": {**common, "cleanup.policy": "compact", "retention.ms": week},
        # compacted only (expired windows are tombstoned): no wall-clock retention under old event times
        "win-changelog": {**common, "cleanup.policy": "compact", "retention.ms": week},
        "sess-changelog": {**common, "cleanup.policy": "compact", "retention.ms": week},
        "ver-changelog": {**common, "cleanup.policy": "compact", "retention.ms": week,
                          "min.compaction.lag.ms": str(3_600_000 + DAY)},
        "j-this-join-store-changelog": {**common, "cleanup.policy": "compact", "retention.ms": week},
        "j-left-shared-join-store-changelog": {**common, "cleanup.policy": "compact", "retention.ms": week},
    }


def test_an_existing_repartition_topic_with_another_partition_count_is_refused(spark, spark_broker, tmp_path):
    servers, app_id = spark_broker.bootstrap, "fidelity-existing"
    source = make_topic(spark_broker, f"{app_id}-in", 3)
    stale = f"{app_id}-by-value-repartition"
    make_topic(spark_broker, stale, 5)
    b = StreamsBuilder()
    (b.stream(source, C).groupBy(lambda k, v: v, Grouped.as_("by-value").withKeySerde(S).withValueSerde(S))
      .count().toStream().to(f"{app_id}-out", Produced.with_(S, L)))
    app = b.build(spark, {"application.id": app_id, "bootstrap.servers": servers, "state.dir": str(tmp_path)})
    with pytest.raises(StreamsError, match=f"Existing internal topic {stale} has invalid partitions: "
                                           f"expected: 3; actual: 5"):
        app.start()
    assert not app.queries
    assert f"{app_id}-KSTREAM-AGGREGATE-STATE-STORE-0000000002-changelog" not in _partitions(servers)


def test_a_stream_table_join_over_topics_not_co_partitioned_fails_at_start(spark, spark_broker, tmp_path):
    servers, app_id = spark_broker.bootstrap, "fidelity-copartition"
    left, right = make_topic(spark_broker, f"{app_id}-left", 3), make_topic(spark_broker, f"{app_id}-right", 2)
    b = StreamsBuilder()
    b.stream(left, C).join(b.table(right, C), lambda a, c: a + c).to(f"{app_id}-out", Produced.with_(S, S))
    app = b.build(spark, {"application.id": app_id, "bootstrap.servers": servers, "state.dir": str(tmp_path)})
    with pytest.raises(TopicsNotCopartitionedError, match=r"^Topics not co-partitioned: \["):
        app.start()
    assert not app.queries
    assert not [t for t in _partitions(servers) if t.startswith(f"{app_id}-") and t.endswith("-changelog")]


def test_two_joins_of_one_rekeyed_stream_with_tables_of_different_counts_fail_at_start(spark, spark_broker,
                                                                                       tmp_path):
    """Kafka's co-partition groups are closed over shared topics: the repartition topic feeds both
    joins, so both tables must have its count (one of them used to be joined partition by partition
    with a topic of another count, pairing different keys)."""
    from streams import Joined
    servers, app_id = spark_broker.bootstrap, "fidelity-two-joins"
    source = make_topic(spark_broker, f"{app_id}-in", 3)
    t1, t2 = make_topic(spark_broker, f"{app_id}-t1", 2), make_topic(spark_broker, f"{app_id}-t2", 4)
    b = StreamsBuilder()
    keyed = b.stream(source, C).selectKey(lambda k, v: v)
    keyed.join(b.table(t1, C), lambda a, c: c, Joined.with_(S, S, S)).to(f"{app_id}-out1", Produced.with_(S, S))
    keyed.join(b.table(t2, C), lambda a, c: c, Joined.with_(S, S, S)).to(f"{app_id}-out2", Produced.with_(S, S))
    app = b.build(spark, {"application.id": app_id, "bootstrap.servers": servers, "state.dir": str(tmp_path)})
    with pytest.raises(TopicsNotCopartitionedError, match=rf"Topics not co-partitioned: \[{t1} \(2 partitions\), "
                                                          rf"{t2} \(4 partitions\)\]"):
        app.start()
    assert not [t for t in _partitions(servers) if t.startswith(f"{app_id}-KSTREAM")]
