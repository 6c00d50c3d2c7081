"""``riverlog offsets``' topic-partition filters against Kafka's GetOffsetShellParsingTest:
``--topic-partitions`` rules, ``--topic`` regexes with ``--partitions`` ids, and their errors."""
from __future__ import annotations

import click
import pytest

from broker.cli.get_offsets import offset_rules
from broker.cli.topic_partition_filter import (TopicPartitionFilterError, allowed, select, topic_allowed,
                                               topic_and_partitions, topic_partition_rules)

pytestmark = pytest.mark.unit

OFFSETS = "__consumer_offsets"


def check(rules, topics_in, topics_out, partitions_in, partitions_out):
    assert [t for t in topics_in if not topic_allowed(rules, t)] == []
    assert [t for t in topics_out if topic_allowed(rules, t)] == []
    assert [tp for tp in partitions_in if not allowed(rules, *tp)] == []
    assert [tp for tp in partitions_out if allowed(rules, *tp)] == []


def test_topic_name_is_a_whole_name_match():
    check(topic_partition_rules("test"), ["test"], ["test1", OFFSETS], [("test", 0), ("test", 1)],
          [("test1", 0), (OFFSETS, 0)])
    check(topic_partition_rules(OFFSETS), [OFFSETS], ["test1"], [(OFFSETS, 1)], [("test1", 0)])


def test_topic_name_list_and_regex():
    check(topic_partition_rules("test,test1,__consumer_offsets"), ["test", "test1", OFFSETS], ["test2"],
          [("test", 0), ("test1", 1), (OFFSETS, 0)], [("test2", 0)])
    check(topic_partition_rules("test.*"), ["test", "test1", "test2"], [OFFSETS], [("test2", 0)], [(OFFSETS, 0)])


def test_partition_patterns():
    check(topic_partition_rules(":0"), ["test", OFFSETS], [], [("test", 0), (OFFSETS, 0)],
          [("test2", 1), (OFFSETS, 1)])
    check(topic_partition_rules(":1-3"), ["test"], [], [("test", 1), ("test1", 2)], [("test2", 0), ("test2", 3)])
    check(topic_partition_rules(":1-"), ["test"], [], [("test", 1), ("test1", 2)], [("test2", 0), (OFFSETS, 0)])
    check(topic_partition_rules(":-3"), ["test3"], [], [("test", 0), ("test2", 2)], [("test3", 3), (OFFSETS, 3)])


def test_complex_rules():
    rules = topic_partition_rules("test.*:0,__consumer_offsets:1-2,.*:3")
    check(rules, ["test", "test1", "custom", OFFSETS], [],
          [("test", 0), ("test1", 0), ("test2", 3), ("custom", 3), (OFFSETS, 1), (OFFSETS, 3)],
          [("test", 1), ("custom", 0), (OFFSETS, 0), (OFFSETS, 2)])


def test_trailing_comma_adds_no_rule_for_every_topic():
    check(topic_partition_rules("test,"), ["test"], ["other"], [("test", 5)], [("other", 0)])


def test_topic_and_partition_ids():
    check(topic_and_partitions("topic", "1,3,5"), ["topic"], ["topic1"], [("topic", 1), ("topic", 5)],
          [("topic", 0), ("topic", 2), ("topic1", 1)])
    check(topic_and_partitions(None, None), ["any", OFFSETS], [], [("any", 9)], [])
    check(topic_and_partitions("a, b", None), ["a", "b"], ["ab"], [("b", 0)], [])


@pytest.mark.parametrize("call, message", [
    (lambda: topic_partition_rules("test:x"), "Invalid rule specification: test:x"),
    (lambda: topic_partition_rules("test:1:2"), "Invalid rule specification: test:1:2"),
    (lambda: topic_and_partitions("t", "1,a"),
     "--partitions expects a comma separated list of numeric partition ids, but received: 1,a"),
    (lambda: topic_and_partitions("(", None), "( is an invalid regex."),
])
def test_malformed_filters_fail_with_kafkas_messages(call, message):
    with pytest.raises(TopicPartitionFilterError) as e:
        call()
    assert str(e.value) == message


def test_topic_partitions_with_topic_or_partitions_is_refused():
    for args in (("t", None, ":1"), (None, "1", ":1")):
        with pytest.raises(click.UsageError, match="--topic-partitions cannot be used with --topic or --partitions"):
            offset_rules(*args)


def test_select_orders_and_leaves_out_internal_topics_when_asked():
    every = {"b": [1, 0], OFFSETS: [0, 1], "a": [0]}
    rules = topic_partition_rules(".*:0-1")
    assert select(rules, every, {OFFSETS}, False) == [(OFFSETS, 0), ("a", 0), ("b", 0)]
    assert select(rules, every, {OFFSETS}, True) == [("a", 0), ("b", 0)]
    assert select(topic_partition_rules("c"), every, set(), False) == []
