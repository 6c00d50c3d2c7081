"""The configs an application gives its internal topics, against Kafka Streams' ``InternalTopicConfig``
subclasses (``RepartitionTopicConfig``, ``UnwindowedUnversionedChangelogTopicConfig``,
``WindowedChangelogTopicConfig``, ``VersionedChangelogTopicConfig``) and ``InternalTopicManager``'s
layering: library defaults < ``topic.*`` settings < the store's ``withLoggingEnabled`` configs."""
from __future__ import annotations

import pytest

from broker.errors import InvalidConfigError
from streams import JoinWindows, Materialized, SessionWindows, SlidingWindows, StreamJoined, StreamsBuilder, \
    TimeWindows
from streams.internal_topics import (additional_retention, changelog_config, kafka_windowed_stores,
                                     repartition_topic_config, topic_defaults, versioned_stores)
from streams.versioned import Stores

pytestmark = pytest.mark.unit
DAY = 86_400_000


def _stores(build):
    b = StreamsBuilder()
    build(b)
    t = b.build()
    return t, t.stores()


def _configs(build, config=None):
    config = config or {}
    t, stores = _stores(build)
    windowed, versioned = kafka_windowed_stores(t), versioned_stores(t)
    return {name: changelog_config(s, topic_defaults(config), additional_retention(config), versioned.get(name),
                                   name in windowed) for name, s in stores.items()}


def test_window_and_session_changelogs_expire_after_the_stores_retention_and_a_day():
    def build(b):
        s = b.stream("in")
        s.groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(60_000, 10_000)).count(Materialized.as_("tw"))
        s.groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(60_000, 10_000)).count(
            Materialized.as_("long").withRetention(600_000))
        s.groupByKey().windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(10_000, 1_000)).count(
            Materialized.as_("slide"))
        s.groupByKey().windowedBy(SessionWindows.ofInactivityGapAndGrace(5_000, 1_000)).count(Materialized.as_("ss"))
        s.groupByKey().count(Materialized.as_("kv"))
    # compacted only by default (expired windows are tombstoned); Kafka's compact,delete on request
    assert _configs(build)["tw"] == {"cleanup.policy": "compact", "message.timestamp.type": "CreateTime"}
    c = _configs(build, {"topic.cleanup.policy": "compact,delete"})
    base = {"cleanup.policy": "compact,delete", "message.timestamp.type": "CreateTime"}
    assert c["tw"] == {**base, "retention.ms": str(70_000 + DAY)}        # size + grace
    assert c["long"] == {**base, "retention.ms": str(600_000 + DAY)}     # withRetention
    assert c["slide"] == {**base, "retention.ms": str(21_000 + DAY)}     # 2 * difference + grace
    assert c["ss"] == {**base, "retention.ms": str(6_000 + DAY)}         # gap + grace
    assert c["kv"] == base                                                 # topic.* reaches every changelog


def test_the_additional_retention_is_windowstore_changelog_additional_retention_ms():
    def build(b):
        b.stream("in").groupByKey().windowedBy(TimeWindows.ofSizeWithNoGrace(1_000)).count(Materialized.as_("tw"))
    assert _configs(build, {"windowstore.changelog.additional.retention.ms": "5",
                            "topic.cleanup.policy": "compact,delete"})["tw"]["retention.ms"] == "1005"
    with pytest.raises(InvalidConfigError, match="windowstore.changelog.additional.retention.ms"):
        additional_retention({"windowstore.changelog.additional.retention.ms": "a day"})


def test_stream_join_stores_are_windowed_and_the_outer_shared_store_is_not():
    def build(b):
        b.stream("a").outerJoin(b.stream("b"), lambda x, y: x, JoinWindows.ofTimeDifferenceAndGrace(5_000, 2_000),
                                StreamJoined.as_("j")).to("out")
    c = _configs(build, {"topic.cleanup.policy": "compact,delete"})
    for side in ("j-outer-this-join-store", "j-outer-other-join-store"):
        assert c[side]["cleanup.policy"] == "compact,delete"
        assert c[side]["retention.ms"] == str(12_000 + DAY)              # before + after + grace
    assert c["j-outer-shared-join-store"] == {"cleanup.policy": "compact,delete", "message.timestamp.type": "CreateTime"}


def test_a_versioned_tables_changelog_keeps_history_plus_a_day_before_compaction():
    def build(b):
        b.table("t", materialized=Materialized.as_(Stores.persistentVersionedKeyValueStore("v", 3_600_000)))
    assert _configs(build)["v"] == {"cleanup.policy": "compact", "message.timestamp.type": "CreateTime",
                                    "min.compaction.lag.ms": str(3_600_000 + DAY)}


def test_topic_prefixed_settings_sit_between_the_library_defaults_and_the_stores_own():
    def build(b):
        s = b.stream("in")
        s.groupByKey().windowedBy(TimeWindows.ofSizeWithNoGrace(1_000)).count(
            Materialized.as_("own").withLoggingEnabled({"retention.ms": "42", "segment.ms": "7"}))
        s.groupByKey().windowedBy(TimeWindows.ofSizeWithNoGrace(1_000)).count(Materialized.as_("plain"))
    config = {"topic.retention.ms": "9", "topic.segment.ms": "3", "topic.min.insync.replicas": "2",
              "topic.cleanup.policy": "compact,delete"}
    c = _configs(build, config)
    assert c["own"]["retention.ms"] == "42" and c["own"]["segment.ms"] == "7"
    # a topic.retention.ms does not replace the window store's computed retention (Kafka checks
    # only the store's own configs)
    assert c["plain"]["retention.ms"] == str(1_000 + DAY) and c["plain"]["segment.ms"] == "3"
    assert c["plain"]["min.insync.replicas"] == "2"
    assert repartition_topic_config(topic_defaults(config)) == {
        "cleanup.policy": "compact,delete", "segment.bytes": "52428800", "retention.ms": "9", "segment.ms": "3",
        "min.insync.replicas": "2", "message.timestamp.type": "CreateTime"}
    assert repartition_topic_config({}) == {"cleanup.policy": "delete", "segment.bytes": "52428800",
                                            "retention.ms": "-1", "message.timestamp.type": "CreateTime"}


def test_two_aggregations_given_one_store_name_are_refused_as_kafka_refuses_a_second_store():
    """Kafka's ``InternalTopologyBuilder.addStateStore``; shared, the two counts were one count."""
    from streams.errors import TopologyError
    b = StreamsBuilder()
    b.stream("a").groupByKey().count(Materialized.as_("x")).toStream().to("out-a")
    b.stream("c").groupByKey().count(Materialized.as_("x")).toStream().to("out-c")
    with pytest.raises(TopologyError, match="A different StateStore has already been added with the name x"):
        b.build()


def _two_joins_of_one_rekeyed_stream():
    from streams import Consumed, Joined, Produced, Serdes
    S = Serdes.String()
    b = StreamsBuilder()
    keyed = b.stream("s", Consumed.with_(S, S)).selectKey(lambda k, v: v)
    joined = Joined.with_(S, S, S)
    keyed.join(b.table("t1", Consumed.with_(S, S)), lambda a, c: c, joined).to("out1", Produced.with_(S, S))
    keyed.join(b.table("t2", Consumed.with_(S, S)), lambda a, c: c, joined).to("out2", Produced.with_(S, S))
    return b.build()


def test_joins_sharing_a_repartition_topic_form_one_co_partition_group():
    """``InternalTopologyBuilder.copartitionGroups`` closes the groups over shared topics: the two
    tables must agree. Per join, the repartition topic took the last table's 4 partitions and the
    join with the 2-partition table paired partitions that hold different keys."""
    from streams.joins import TopicsNotCopartitionedError
    from streams.testing import TopologyTestDriver
    with pytest.raises(TopicsNotCopartitionedError, match=r"Topics not co-partitioned: \[t1 \(2 partitions\), "
                                                          r"t2 \(4 partitions\)\]"):
        TopologyTestDriver(_two_joins_of_one_rekeyed_stream(), {"application.id": "app"},
                           partitions={"s": 3, "t1": 2, "t2": 4})
    d = TopologyTestDriver(_two_joins_of_one_rekeyed_stream(), {"application.id": "app"},
                           partitions={"s": 3, "t1": 2, "t2": 2})
    assert d._interp.partitions("app-KSTREAM-KEY-SELECT-0000000001-repartition") == 2


def test_a_join_of_two_rekeyed_streams_takes_the_count_a_table_join_of_one_of_them_needs():
    """Both repartition topics are in the table join's group through the shared one, so both take
    the table's 2 partitions; per join they took 3 and 2, and the windowed join missed keys."""
    from streams import Consumed, Joined, JoinWindows, Produced, Serdes, StreamJoined
    from streams.testing import TopologyTestDriver
    S = Serdes.String()
    b = StreamsBuilder()
    k1 = b.stream("s1", Consumed.with_(S, S)).selectKey(lambda k, v: v)
    k2 = b.stream("s2", Consumed.with_(S, S)).selectKey(lambda k, v: v)
    k1.join(k2, lambda a, c: a + c, JoinWindows.ofTimeDifferenceWithNoGrace(1000),
            StreamJoined.with_(S, S, S)).to("out", Produced.with_(S, S))
    k2.join(b.table("t", Consumed.with_(S, S)), lambda a, c: c, Joined.with_(S, S, S)).to("out-t", Produced.with_(S, S))
    d = TopologyTestDriver(b.build(), {"application.id": "app"}, partitions={"s1": 3, "s2": 3, "t": 2})
    assert {d._interp.partitions(f"app-KSTREAM-KEY-SELECT-000000000{i}-repartition") for i in (1, 3)} == {2}
    left, right = d.createInputTopic("s1", S, S), d.createInputTopic("s2", S, S)
    for i in range(12):
        left.pipeInput(f"x{i}", f"k{i}", 1000 + i)
    for i in range(12):
        right.pipeInput(f"y{i}", f"k{i}", 1000 + i)
    assert sorted(k for k, _ in d.createOutputTopic("out", S, S).readKeyValuesToList()) == \
        sorted(f"k{i}" for i in range(12))


def test_a_topic_cleanup_policy_without_compact_is_refused_as_with_logging_enabled_refuses_it():
    with pytest.raises(InvalidConfigError, match="topic.cleanup.policy"):
        topic_defaults({"topic.cleanup.policy": "delete"})
    assert topic_defaults({"topic.cleanup.policy": "compact, delete"}) == {"cleanup.policy": "compact, delete"}
