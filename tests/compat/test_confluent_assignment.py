"""A consumer's assign-family calls fail where confluent-kafka's (librdkafka's) fail, with the same
codes, and change nothing when they do."""
from __future__ import annotations

from broker.client import AdminClient, Consumer, KafkaError, KafkaException, NewTopic, TopicPartition


def _create(servers: str, name: str, partitions: int) -> None:
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def _code(call, partitions) -> int:
    try:
        call(partitions)
    except KafkaException as e:
        return e.args[0].code()
    raise AssertionError(f"{call.__name__}({partitions}) must fail")


def _owned(c: Consumer) -> list[int]:
    return [tp.partition for tp in c.assignment()]


def test_incremental_assign_and_unassign_refuse_what_is_and_is_not_assigned(shared_broker, topic_name):
    _create(shared_broker.bootstrap, topic_name, 3)
    t0, t1, t2 = (TopicPartition(topic_name, p) for p in range(3))
    with Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": topic_name}) as c:
        assert _code(c.incremental_unassign, [t0]) == KafkaError._INVALID_ARG   # nothing assigned yet
        c.incremental_unassign([])
        c.incremental_assign([t1])
        assert _code(c.incremental_assign, [t1]) == KafkaError._CONFLICT
        assert _code(c.incremental_assign, [t0, t1]) == KafkaError._CONFLICT     # all or nothing: t0 not added
        assert _code(c.incremental_assign, [t2, TopicPartition(topic_name, 2, 5)]) == KafkaError._INVALID_ARG
        assert _owned(c) == [1]
        c.incremental_assign([t2, t0])
        assert _owned(c) == [0, 1, 2]                                              # in partition order
        c.incremental_unassign([t1])
        assert _code(c.incremental_unassign, [t0, t1]) == KafkaError._INVALID_ARG  # t1 is gone; t0 stays
        assert _owned(c) == [0, 2]
        c.assign([t1])                                                             # not subscribed: any call goes
        assert _owned(c) == [1]


def test_an_eager_subscription_refuses_incremental_calls(shared_broker, topic_name):
    _create(shared_broker.bootstrap, topic_name, 1)
    with Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": topic_name,
                   "partition.assignment.strategy": "range"}) as c:
        c.subscribe([topic_name])
        assert _code(c.incremental_assign, [TopicPartition(topic_name, 0)]) == KafkaError._STATE
        assert _code(c.incremental_unassign, [TopicPartition(topic_name, 0)]) == KafkaError._STATE


def test_a_cooperative_subscription_refuses_assign_and_unassign(shared_broker, topic_name):
    _create(shared_broker.bootstrap, topic_name, 1)
    with Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": topic_name,
                   "partition.assignment.strategy": "cooperative-sticky"}) as c:
        c.subscribe([topic_name])
        assert _code(c.assign, [TopicPartition(topic_name, 0)]) == KafkaError._STATE
        try:
            c.unassign()
        except KafkaException as e:
            assert e.args[0].code() == KafkaError._STATE
        else:
            raise AssertionError("unassign() under a cooperative subscription must fail")
