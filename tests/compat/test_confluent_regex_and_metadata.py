"""Regex subscriptions and periodic metadata refresh (metadata.max.age.ms), as librdkafka does them,
against a real broker."""
from __future__ import annotations

from broker.client import AdminClient, Consumer, NewPartitions, NewTopic, Producer
from tests.conftest import wait_until


def _create(admin: AdminClient, *names: str, partitions: int = 1) -> None:
    for f in admin.create_topics([NewTopic(n, num_partitions=partitions, replication_factor=1)
                                  for n in names]).values():
        f.result()


def test_regex_subscription_consumes_matching_topics_and_picks_up_new_ones(shared_broker, topic_name):
    servers = shared_broker.bootstrap
    admin = AdminClient({"bootstrap.servers": servers})
    _create(admin, f"{topic_name}-orders-eu", f"{topic_name}-other")
    with Producer({"bootstrap.servers": servers}) as p:
        for t in (f"{topic_name}-orders-eu", f"{topic_name}-other"):
            p.produce(t, value=t.encode())
        p.flush(30)
    consumer = Consumer({"bootstrap.servers": servers, "group.id": topic_name, "auto.offset.reset": "earliest",
                         "metadata.max.age.ms": 200, "heartbeat.interval.ms": 100})
    consumer.subscribe([f"^{topic_name}-orders-.*"])
    seen = set()

    def consumed(want):
        msg = consumer.poll(0.2)
        if msg is not None and msg.error() is None:
            seen.add(msg.topic())
        return want <= seen

    try:
        wait_until(lambda: consumed({f"{topic_name}-orders-eu"}), 30, message="the matching topic's record")
        _create(admin, f"{topic_name}-orders-us")  # created after subscribing
        with Producer({"bootstrap.servers": servers}) as p:
            p.produce(f"{topic_name}-orders-us", value=b"new")
            p.flush(30)
        wait_until(lambda: consumed({f"{topic_name}-orders-us"}), 30, message="the new matching topic's record")
        assert f"{topic_name}-other" not in seen
        assert {tp.topic for tp in consumer.assignment()} == {f"{topic_name}-orders-eu", f"{topic_name}-orders-us"}
    finally:
        consumer.close()
        admin.close()


def test_metadata_max_age_refreshes_partition_counts(shared_broker, topic_name):
    servers = shared_broker.bootstrap
    with AdminClient({"bootstrap.servers": servers}) as admin:
        _create(admin, topic_name)
        p = Producer({"bootstrap.servers": servers, "metadata.max.age.ms": 200})
        p.produce(topic_name, value=b"first")
        assert p.flush(30) == 0
        assert len(p.cluster.topics[topic_name].partitions) == 1
        admin.create_partitions([NewPartitions(topic_name, 3)])[topic_name].result(30)
        # No request failed and nobody asked: only the periodic refresh can tell the producer.
        wait_until(lambda: len(p.cluster.topics[topic_name].partitions) == 3, 30, message="3 partitions seen")
        p.produce(topic_name, value=b"to the new partition", partition=2)
        assert p.flush(30) == 0
        p.close()
