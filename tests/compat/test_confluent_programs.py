"""Programs written the way confluent-kafka-python's documentation writes them, only the import
changed, run against a real broker."""
from __future__ import annotations

from broker.client import AdminClient, Consumer, KafkaError, KafkaException, NewTopic, Producer, TopicPartition


def _create(servers: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": servers})
    for f in admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)]).values():
        f.result()
    admin.close()


def test_producer_with_delivery_reports_and_error_cb(shared_broker, topic_name):
    _create(shared_broker.bootstrap, topic_name)
    errors, delivered = [], []
    conf = {"bootstrap.servers": shared_broker.bootstrap, "error_cb": errors.append,
            "message.timeout.ms": 30000, "queue.buffering.max.ms": 5}

    def delivery_report(err, msg):
        if err is not None:
            delivered.append(("failed", err.code(), err.str()))
        else:
            delivered.append((msg.topic(), msg.partition(), msg.offset()))

    p = Producer(**conf)  # the keyword form
    for i in range(10):
        p.poll(0)
        p.produce(topic_name, f"value-{i}".encode(), callback=delivery_report)
    assert p.flush(30) == 0
    assert delivered == [(topic_name, 0, i) for i in range(10)] and errors == []


def test_consumer_storing_offsets_itself_and_stopping_at_partition_eof(shared_broker, topic_name):
    _create(shared_broker.bootstrap, topic_name)
    with Producer({"bootstrap.servers": shared_broker.bootstrap}) as p:
        for i in range(6):
            p.produce(topic_name, key=str(i), value=str(i))
        p.flush(30)
    conf = {"bootstrap.servers": shared_broker.bootstrap, "group.id": topic_name, "auto.offset.reset": "earliest",
            "enable.auto.offset.store": False, "enable.partition.eof": True}
    consumer = Consumer(conf)
    consumer.subscribe([topic_name])
    seen = []
    try:
        while True:
            msg = consumer.poll(timeout=10.0)
            assert msg is not None, "no end of partition reported"
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    break
                raise KafkaException(msg.error())
            seen.append(msg.value())
            if int(msg.value()) < 4:  # processed: store it for the next commit
                consumer.store_offsets(msg)
        assert consumer.memberid()
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(topic_name, 0)], timeout=10)
    finally:
        consumer.close()
    assert seen == [str(i).encode() for i in range(6)]
    assert committed[0].offset == 4 and committed[0].metadata is None


def test_store_offsets_needs_auto_store_off_and_incremental_assign_refuses_twice(shared_broker, topic_name):
    _create(shared_broker.bootstrap, topic_name)
    with Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": topic_name}) as c:
        try:
            c.store_offsets(offsets=[TopicPartition(topic_name, 0, 1)])
        except KafkaException as e:
            assert e.args[0].code() == KafkaError._INVALID_ARG
        else:
            raise AssertionError("store_offsets with enable.auto.offset.store=true must fail")
        c.incremental_assign([TopicPartition(topic_name, 0, 0)])
        try:
            c.incremental_assign([TopicPartition(topic_name, 0, 0)])
        except KafkaException as e:
            assert e.args[0].code() == KafkaError._CONFLICT
        else:
            raise AssertionError("assigning an assigned partition must fail")


def test_metadata_has_confluents_attribute_names(shared_broker, topic_name):
    _create(shared_broker.bootstrap, topic_name, partitions=2)
    with AdminClient(**{"bootstrap.servers": shared_broker.bootstrap}) as admin:
        md = admin.list_topics(timeout=10)
        assert admin.poll(0) == 0
    t = md.topics[topic_name]
    assert t.topic == topic_name and sorted(p.id for p in t.partitions.values()) == [0, 1]
    assert all(p.isrs == p.isr and p.leader in md.brokers for p in t.partitions.values())
    broker = next(iter(md.brokers.values()))
    assert broker.id in md.brokers and broker.host and broker.port > 0
