"""``riverlog topics describe`` lines against Kafka's TopicCommand (TopicCommandTest's describe
cases): ``Leader: none``, and the report options picking partitions."""
from __future__ import annotations

import click
import pytest

from broker.cli.params import PARTITION_COUNT, REPLICATION_FACTOR
from broker.cli.topic_description import PartitionInfo, Reports, TopicInfo, describe_lines

pytestmark = pytest.mark.unit

TOPIC = TopicInfo("orders", "id1", [PartitionInfo(1, -1, [1, 2, 3], []), PartitionInfo(0, 1, [1, 2, 3], [1, 2, 3]),
                                    PartitionInfo(2, 2, [2, 3, 1], [2, 3]), PartitionInfo(3, 4, [4], [4])],
                  {"retention.ms": "1000", "cleanup.policy": "compact"}, min_isr=2)


def partitions(reports: Reports) -> list[int]:
    return [int(line.split("\tPartition: ")[1].split("\t")[0]) for line in describe_lines(TOPIC, reports)]


def test_full_description_in_kafkas_format():
    assert describe_lines(TOPIC) == [
        "Topic: orders\tTopicId: id1\tPartitionCount: 4\tReplicationFactor: 3\t"
        "Configs: cleanup.policy=compact,retention.ms=1000",
        "\tTopic: orders\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3",
        "\tTopic: orders\tPartition: 1\tLeader: none\tReplicas: 1,2,3\tIsr: ",
        "\tTopic: orders\tPartition: 2\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,3",
        "\tTopic: orders\tPartition: 3\tLeader: 4\tReplicas: 4\tIsr: 4"]


def test_report_options_pick_partitions_and_drop_the_topic_line():
    live = frozenset({1, 2, 3})
    assert partitions(Reports(under_replicated=True)) == [1, 2]
    assert partitions(Reports(unavailable=True, live_brokers=live)) == [1, 3]
    assert partitions(Reports(under_min_isr=True)) == [1, 3]
    assert partitions(Reports(at_min_isr=True)) == [2]
    assert partitions(Reports(under_replicated=True, at_min_isr=True)) == [1, 2]


def test_topics_with_overrides_prints_only_topic_lines_of_topics_with_overrides():
    assert describe_lines(TOPIC, Reports(with_overrides=True)) == [describe_lines(TOPIC)[0]]
    plain = TopicInfo("plain", "id2", [PartitionInfo(0, 1, [1], [1])], {})
    assert describe_lines(plain, Reports(with_overrides=True)) == []


@pytest.mark.parametrize("kind, message", [
    (PARTITION_COUNT, "The partitions must be greater than 0"),
    (REPLICATION_FACTOR, "The replication factor must be between 1 and 32767 inclusive"),
])
def test_create_refuses_zero_partitions_or_replicas_with_kafkas_message(kind, message):
    """TopicCommand.CommandTopicPartition: 0 is refused before anything is sent (-1 stays the
    broker's default)."""
    with pytest.raises(click.BadParameter) as e:
        kind.convert("0", None, None)
    assert e.value.message.startswith(message)
    assert (kind.convert("-1", None, None), kind.convert("3", None, None)) == (-1, 3)
