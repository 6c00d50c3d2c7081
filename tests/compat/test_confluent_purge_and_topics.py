"""Producer.purge and AdminClient.describe_topics as confluent-kafka's documentation uses them,
against a real broker."""
from __future__ import annotations

from broker.client import (AdminClient, KafkaError, NewTopic, Node, Producer, TopicCollection, TopicDescription)
from broker.errors import UnknownTopicOrPartitionError
from tests.conftest import wait_until


def _create(servers: str, name: str, partitions: int = 1) -> None:
    with AdminClient({"bootstrap.servers": servers}) as admin:
        for f in admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)]).values():
            f.result()


def test_purge_in_queue_reports_purge_queue_and_the_producer_goes_on(shared_broker, topic_name):
    _create(shared_broker.bootstrap, topic_name, 2)
    reports = []
    p = Producer({"bootstrap.servers": shared_broker.bootstrap, "linger.ms": 600_000})
    for i in range(5):
        p.produce(topic_name, value=str(i), on_delivery=lambda err, msg: reports.append((err, msg)))
    p.purge(in_queue=True, in_flight=False)
    assert p.flush(30) == 0 and len(p) == 0
    assert [err.code() for err, _ in reports] == [KafkaError._PURGE_QUEUE] * 5
    # never partitioned: no partition (None, as confluent-kafka's accessor says) and no offset
    assert all(msg.partition() is None and msg.offset() < 0 for _, msg in reports)
    reports.clear()
    p.produce(topic_name, value=b"after", partition=1, on_delivery=lambda err, msg: reports.append((err, msg)))
    assert p.flush(30) == 0
    assert reports[0][0] is None and (reports[0][1].partition(), reports[0][1].offset()) == (1, 0)
    p.close()


def test_purge_in_flight_reports_purge_inflight(broker_factory, topic_name):
    broker = broker_factory()
    _create(broker.bootstrap, topic_name)
    reports = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "enable.idempotence": False})
    p.produce(topic_name, value=b"warm-up")
    assert p.flush(30) == 0
    broker.pause()  # answers stop: what is sent now stays in flight
    try:
        p.produce(topic_name, value=b"in-flight", on_delivery=lambda err, msg: reports.append(err))
        wait_until(lambda: any(s.in_flight() for s in p._sender.streams.values()), message="a request in flight")
        p.purge(in_queue=False, in_flight=True, blocking=True)
        assert p.poll(10) == 1 and reports[0].code() == KafkaError._PURGE_INFLIGHT and len(p) == 0
    finally:
        broker.resume()
    p.produce(topic_name, value=b"after", on_delivery=lambda err, msg: reports.append(err))
    assert p.flush(30) == 0 and reports[1] is None and len(reports) == 2  # the purged one's answer is ignored
    p.close()


def test_describe_topics(shared_broker, topic_name):
    _create(shared_broker.bootstrap, topic_name, 3)
    with AdminClient({"bootstrap.servers": shared_broker.bootstrap}) as admin:
        fs = admin.describe_topics(TopicCollection([topic_name, topic_name + "-missing"]))
        desc = fs[topic_name].result(30)
        assert isinstance(desc, TopicDescription) and desc.name == topic_name and not desc.is_internal
        assert desc.topic_id and [p.id for p in desc.partitions] == [0, 1, 2]
        for p in desc.partitions:
            assert isinstance(p.leader, Node) and p.leader.host and p.leader.port > 0
            assert [n.id for n in p.replicas] == [p.leader.id] and [n.id for n in p.isr] == [p.leader.id]
        try:
            fs[topic_name + "-missing"].result(30)
            raise AssertionError("a missing topic was described")
        except UnknownTopicOrPartitionError as e:
            assert e.args[0] == KafkaError.UNKNOWN_TOPIC_OR_PART
