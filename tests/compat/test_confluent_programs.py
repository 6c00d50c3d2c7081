"""Programs written the way confluent-kafka-python's documentation writes them, only the import
changed, run against a real broker."""
from __future__ import annotations

import threading

from broker.client import AdminClient, Consumer, KafkaError, KafkaException, NewTopic, Producer, TopicPartition
from tests.conftest import wait_until


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


def _produce(servers: str, topic: str, n: int) -> None:
    with Producer({"bootstrap.servers": servers}) as p:
        for i in range(n):
            p.produce(topic, value=str(i))
        assert p.flush(30) == 0


def test_committing_or_storing_an_error_event_is_refused_and_skips_nothing(shared_broker, topic_name):
    """A _PARTITION_EOF event's offset is the end of the partition: committing offset + 1 of it
    skipped the next record produced. confluent-kafka refuses it with _INVALID_ARG."""
    _create(shared_broker.bootstrap, topic_name)
    _produce(shared_broker.bootstrap, topic_name, 2)
    conf = {"bootstrap.servers": shared_broker.bootstrap, "group.id": topic_name, "auto.offset.reset": "earliest",
            "enable.partition.eof": True, "enable.auto.commit": False, "enable.auto.offset.store": False}
    with Consumer(conf) as c:
        c.assign([TopicPartition(topic_name, 0)])
        msgs = [c.poll(10) for _ in range(3)]
        eof = msgs[2]
        assert eof.error().code() == KafkaError._PARTITION_EOF
        for call, verb in ((c.commit, "commit"), (c.store_offsets, "store")):
            try:
                call(eof)
            except KafkaException as e:
                assert e.args[0].code() == KafkaError._INVALID_ARG
                assert e.args[0].str() == f"Cannot {verb} offsets for message with error: '{eof.error().str()}'"
            else:
                raise AssertionError(f"{verb} of an error event must fail")
        c.commit(msgs[1], asynchronous=False)
        assert c.committed([TopicPartition(topic_name, 0)], timeout=10)[0].offset == 2


def test_commit_is_asynchronous_by_default_and_on_commit_is_served_by_poll(shared_broker, topic_name):
    """As confluent-kafka: commit() returns None at once; on_commit(err, partitions) runs on the
    application's thread from poll() with err a KafkaError (err.code() a method) or None."""
    _create(shared_broker.bootstrap, topic_name)
    _produce(shared_broker.bootstrap, topic_name, 1)
    seen = []

    def on_commit(err, partitions):
        seen.append((err, [(tp.topic, tp.partition, tp.offset, tp.error) for tp in partitions],
                     threading.current_thread()))

    base = {"bootstrap.servers": shared_broker.bootstrap, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "on_commit": on_commit}
    with Consumer({**base, "group.id": topic_name}) as c:
        c.assign([TopicPartition(topic_name, 0)])
        msg = c.poll(10)
        assert msg.error() is None
        assert c.commit(msg) is None
        wait_until(lambda: c.poll(0.1) is None and seen, 20, 0, "on_commit from poll()")
        assert seen == [(None, [(topic_name, 0, 1, None)], threading.current_thread())]
    # A member holds the group: a commit from outside it is refused, reported through on_commit.
    member = Consumer({**base, "group.id": topic_name + "-busy", "on_commit": None})
    member.subscribe([topic_name])
    try:
        wait_until(lambda: member.poll(0.1) is None and member.assignment(), 30, 0, "the member's assignment")
        seen.clear()
        outsider = Consumer({**base, "group.id": topic_name + "-busy"})
        assert outsider.commit(offsets=[TopicPartition(topic_name, 0, 1)]) is None
        outsider.close()                                    # serves the outstanding commit's on_commit
        [(err, partitions, thread)] = seen
        assert err.code() == KafkaError.UNKNOWN_MEMBER_ID and thread is threading.current_thread()
        assert partitions[0][3].code() == KafkaError.UNKNOWN_MEMBER_ID
    finally:
        member.close()
