"""KIP-320 on a real cluster: after an unclean election the new leader lacks records a consumer
already read, and is written past the consumer's position. The consumer validates its position
against the new leader's log (OffsetsForLeaderEpoch) and reads on from where the logs diverge, as
librdkafka does, instead of fetching on from its position and skipping the new leader's records
in between; with ``auto.offset.reset=error`` it reports the truncation instead. A committed offset
keeps its epoch, so a member starting from it validates it as well."""
from __future__ import annotations

import time

import pytest

from broker.client import AdminClient, Consumer, ElectionType, KafkaError, TopicPartition
from tests.conftest import wait_until
from tests.integration.test_unclean_election import _produce, diverged

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def _records(consumer, n: int, timeout: float = 60) -> list:
    out, deadline = [], time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None:
            out.append(m)
    return out


def test_a_consumer_reads_the_new_leaders_records_after_its_log_was_truncated(cluster_factory, topic_name):
    cluster = diverged(cluster_factory, topic_name)
    tp = TopicPartition(topic_name, 0)

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic_name, 0, 0)])
    read = _records(consumer, 15)
    assert [m.value() for m in read][-1] == b"only-1-4" and read[-1].error() is None
    epoch = read[-1].leader_epoch()
    assert epoch is not None                       # the batch's epoch: the position's
    consumer.pause([tp])                           # nothing fetched while the leadership moves

    cluster.nodes[1].kill9()
    wait_until(lambda: cluster.partition(topic_name, 0).leader == -1, 30, 0.1, "no leader")
    cluster.nodes[2].restart()
    cluster.wait_for_brokers(1)
    with AdminClient({"bootstrap.servers": cluster.nodes[3].bootstrap}) as admin:
        assert admin.elect_leaders(ElectionType.UNCLEAN, [tp]).result(30)[tp] is None
    wait_until(lambda: cluster.partition(topic_name, 0).leader == 2, 30, 0.1, "broker 2 leading")
    new = [b"new-%d" % i for i in range(8)]       # offsets 10..17: past the consumer's position 15
    _produce(cluster.nodes[2].bootstrap, topic_name, new)

    consumer.resume([tp])
    again = _records(consumer, 8)
    consumer.close()
    assert [(m.offset(), m.value()) for m in again] == list(zip(range(10, 18), new))

    strict = Consumer({"bootstrap.servers": cluster.nodes[2].bootstrap, "auto.offset.reset": "error"})
    strict.assign([TopicPartition(topic_name, 0, 15, leader_epoch=epoch)])   # a stored position with its epoch
    event = _records(strict, 1)[0]
    strict.close()
    assert event.error() is not None and event.error().code() == KafkaError._AUTO_OFFSET_RESET
    assert "Partition log truncation detected" in event.error().str()

    # a group's committed offset keeps its epoch: a member starting from it validates it too
    group = Consumer({"bootstrap.servers": cluster.nodes[2].bootstrap, "group.id": f"{topic_name}-g",
                      "enable.auto.commit": False})
    group.commit(offsets=[TopicPartition(topic_name, 0, 15, leader_epoch=epoch)], asynchronous=False)
    assert group.committed([tp], 30)[0].leader_epoch == epoch
    group.assign([tp])                              # no offset: the committed one
    from_committed = _records(group, 8)
    group.close()
    assert [(m.offset(), m.value()) for m in from_committed] == list(zip(range(10, 18), new))
