"""More programs written the way confluent-kafka-python's documentation and examples write them,
only the import changed, run against a real broker: the exactly-once consume-transform-produce
loop, the admin API walk-through, context-manager clients, list-of-dicts produce_batch, the
serializing clients and the partitioner setting."""
from __future__ import annotations

import zlib

import pytest

from broker.client import (AclOperation, AdminClient, ConfigResource, ConfigSource, ConsumeError, Consumer, ConsumerGroupState,
                           DeserializingConsumer, IsolationLevel, KafkaError, KafkaException, NewPartitions,
                           NewTopic, OffsetSpec, Producer, SerializingProducer, TopicCollection, TopicPartition)
from broker.client.admin import AlterConfigOpType, ConfigEntry, ConsumerGroupTopicPartitions, ElectionType, ResourceType
from broker.client.serialization import (IntegerDeserializer, IntegerSerializer, JSONDeserializer, JSONSerializer,
                                         StringDeserializer, StringSerializer)


def _create(servers: str, *names: str, partitions: int = 1) -> None:
    with AdminClient({"bootstrap.servers": servers}) as admin:
        for f in admin.create_topics([NewTopic(n, num_partitions=partitions, replication_factor=1)
                                      for n in names]).values():
            f.result()


def test_exactly_once_consume_transform_produce_until_partition_eof(shared_broker, topic_name):
    servers, src, dst = shared_broker.bootstrap, f"{topic_name}-in", f"{topic_name}-out"
    _create(servers, src, dst)
    with Producer({"bootstrap.servers": servers}) as p:
        for i in range(20):
            p.produce(src, key=str(i), value=str(i))
        p.flush(30)

    consumer = Consumer({"bootstrap.servers": servers, "group.id": topic_name, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": servers, "transactional.id": f"{topic_name}-eos"})
    producer.init_transactions()
    consumer.subscribe([src])
    producer.begin_transaction()
    eof = processed = 0
    while True:
        msg = consumer.poll(timeout=10.0)
        assert msg is not None, "no end of partition reported"
        if msg.error():
            if msg.error().code() == KafkaError._PARTITION_EOF:
                eof += 1
                break
            raise KafkaException(msg.error())
        producer.produce(dst, key=msg.key(), value=str(int(msg.value()) * 10).encode())
        processed += 1
        if processed % 7 == 0:  # commit every 7 records, with the consumer's position
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata())
            producer.commit_transaction()
            producer.begin_transaction()
    producer.send_offsets_to_transaction(consumer.position(consumer.assignment()), consumer.consumer_group_metadata())
    producer.commit_transaction()
    committed = consumer.committed([TopicPartition(src, 0)], timeout=10)
    consumer.close()
    producer.close()
    assert (eof, processed, committed[0].offset) == (1, 20, 20)

    with Consumer({"bootstrap.servers": servers, "group.id": f"{topic_name}-check", "auto.offset.reset": "earliest",
                   "enable.partition.eof": True, "isolation.level": "read_committed"}) as check:
        check.subscribe([dst])
        values = []
        while (msg := check.poll(10.0)) is not None and not msg.error():
            values.append(int(msg.value()))
        assert msg is not None and msg.error().code() == KafkaError._PARTITION_EOF
    assert values == [i * 10 for i in range(20)]


def test_admin_api_walk_through(shared_broker, topic_name):
    servers = shared_broker.bootstrap
    a = AdminClient({"bootstrap.servers": servers})
    # create topics
    fs = a.create_topics([NewTopic(topic_name, num_partitions=2, replication_factor=1,
                                   config={"retention.ms": "3600000"})])
    for topic, f in fs.items():
        assert f.result() is None, topic
    # describe topics
    desc = a.describe_topics(TopicCollection([topic_name]))[topic_name].result()
    assert len(desc.partitions) == 2
    # create partitions
    a.create_partitions([NewPartitions(topic_name, 4)])[topic_name].result()
    md = a.list_topics(timeout=10)
    assert len(md.topics[topic_name].partitions) == 4 and md.topics[topic_name].topic == topic_name
    # describe and alter configs
    resource = ConfigResource(ResourceType.TOPIC, topic_name)
    configs = a.describe_configs([resource])[resource].result()
    assert configs["retention.ms"].value == "3600000"
    assert configs["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG
    resource = ConfigResource("topic", topic_name,
                              incremental_configs=[ConfigEntry("retention.ms", "7200000",
                                                               incremental_operation=AlterConfigOpType.SET)])
    a.incremental_alter_configs([resource])[resource].result()
    assert a.describe_configs([resource])[resource].result()["retention.ms"].value == "7200000"
    # APPEND and SUBTRACT change a LIST config part by part (Kafka's ConfigurationControlManager);
    # appending delete to a compacted topic keeps compaction
    def incremental(*entries):
        r = ConfigResource("topic", topic_name, incremental_configs=[
            ConfigEntry(n, v, incremental_operation=op) for n, v, op in entries])
        a.incremental_alter_configs([r])[r].result()
        return a.describe_configs([r])[r].result()
    assert incremental(("cleanup.policy", "compact", AlterConfigOpType.SET))["cleanup.policy"].value == "compact"
    assert incremental(("cleanup.policy", "delete", AlterConfigOpType.APPEND))["cleanup.policy"].value \
        == "compact,delete"
    assert incremental(("cleanup.policy", "compact", AlterConfigOpType.SUBTRACT))["cleanup.policy"].value == "delete"
    with pytest.raises(KafkaException, match="because its type is not LIST"):
        incremental(("retention.ms", "1000", AlterConfigOpType.APPEND))
    with pytest.raises(KafkaException, match=r"min.compaction.lag.ms \(1000\) > max.compaction.lag.ms \(500\)"):
        incremental(("min.compaction.lag.ms", "1000", AlterConfigOpType.SET),
                    ("max.compaction.lag.ms", "500", AlterConfigOpType.SET))
    whole = ConfigResource(ResourceType.TOPIC, topic_name)       # confluent's set_config(name, value[, overwrite])
    whole.set_config("retention.ms", "1800000")
    whole.set_config("retention.ms", "5", overwrite=False)
    a.alter_configs([whole])[whole].result()
    assert a.describe_configs([whole])[whole].result()["retention.ms"].value == "1800000"
    with pytest.raises(ValueError, match="Unknown resource type"):
        ConfigResource("tpoic", topic_name)
    # NewTopic in confluent's argument order: replica_assignment fourth (exclusive with a
    # replication factor, as confluent's), config by keyword; NewTopic and NewPartitions are hashable
    assert NewTopic("x", 1, 1, config={"retention.ms": "1"}).config == {"retention.ms": "1"}
    assert len({NewTopic("x", 1, 1), NewTopic("x", 1, 1)}) == 1 and len({NewPartitions("x", 2)}) == 1
    with pytest.raises(ValueError, match="replication_factor and replica_assignment are mutually exclusive"):
        a.create_topics([NewTopic(topic_name + "-placed", 1, 1, [[0]])])
    # confluent's elect_leaders(ElectionType, [TopicPartition]) and authorized operations
    # the preferred replica leads a new topic already: Kafka's ELECTION_NOT_NEEDED for the partition
    elected = a.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic_name, 0)]).result(30)
    assert elected[TopicPartition(topic_name, 0)].args[0].code() == KafkaError.ELECTION_NOT_NEEDED
    # UNCLEAN only for a leaderless partition: Kafka's ELECTION_NOT_NEEDED, and left out of "every"
    unclean = a.elect_leaders(ElectionType.UNCLEAN, [TopicPartition(topic_name, 0)]).result(30)
    assert unclean[TopicPartition(topic_name, 0)].args[0].code() == KafkaError.ELECTION_NOT_NEEDED
    assert TopicPartition(topic_name, 0) not in a.elect_leaders(ElectionType.UNCLEAN, None).result(30)
    # no authorizer: every operation of each resource type, as Kafka's brokers without one answer
    assert a.describe_cluster().result(30).authorized_operations is None
    assert AclOperation.IDEMPOTENT_WRITE in a.describe_cluster(include_authorized_operations=True).result(30) \
        .authorized_operations
    topic_ops = a.describe_topics(TopicCollection([topic_name]), include_authorized_operations=True)[topic_name] \
        .result(30).authorized_operations
    assert topic_ops == [AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
                         AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS]
    assert a.describe_topics(TopicCollection([topic_name]))[topic_name].result(30).authorized_operations is None
    # produce, then list offsets and delete records
    with Producer({"bootstrap.servers": servers}) as p:
        for i in range(10):
            p.produce(topic_name, value=str(i), partition=0)
        p.flush(30)
    tp = TopicPartition(topic_name, 0)
    latest = a.list_offsets({tp: OffsetSpec.latest()}, isolation_level=IsolationLevel.READ_COMMITTED)[tp].result()
    assert latest.offset == 10
    below = TopicPartition(topic_name, 0, 4)
    assert a.delete_records([below])[below].result().low_watermark == 4
    assert a.list_offsets({tp: OffsetSpec.earliest()})[tp].result().offset == 4
    # groups: a consumer commits, then list, describe and delete its group
    with Consumer({"bootstrap.servers": servers, "group.id": topic_name, "auto.offset.reset": "earliest"}) as c:
        c.subscribe([topic_name])
        while (msg := c.poll(10)) is not None and msg.offset() < 9:
            pass
        c.commit(asynchronous=False)
        listing = [g for g in a.list_consumer_groups().result().valid if g.group_id == topic_name]
        assert listing and listing[0].state in (ConsumerGroupState.STABLE, ConsumerGroupState.COMPLETING_REBALANCING,
                                                ConsumerGroupState.PREPARING_REBALANCING)
        described = a.describe_consumer_groups([topic_name], include_authorized_operations=True)[topic_name].result()
        assert len(described.members) == 1
        assert described.authorized_operations == [AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE,
                                                   AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS]
        offsets = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(topic_name)],
                                                require_stable=True)[topic_name].result()
        assert {p.partition: p.offset for p in offsets.topic_partitions}[0] == 10
        group = a.list_groups(topic_name, timeout=10)[0]  # the older, blocking call
        assert (group.id, group.error, group.protocol_type, len(group.members)) == (topic_name, None, "consumer", 1)
        assert group.broker.id == described.coordinator and group.members[0].id == described.members[0].member_id
    empty = a.list_consumer_groups(states={ConsumerGroupState.EMPTY}).result().valid
    assert topic_name in [g.group_id for g in empty]
    assert a.delete_consumer_groups([topic_name])[topic_name].result() is None
    # delete topics
    assert a.delete_topics([topic_name])[topic_name].result() is None
    try:
        a.describe_topics(TopicCollection([topic_name]))[topic_name].result()
        raise AssertionError("a deleted topic was described")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    a.close()


def test_context_manager_clients_and_list_of_dicts_produce_batch(shared_broker, topic_name):
    servers = shared_broker.bootstrap
    _create(servers, topic_name, partitions=3)
    reports, errors = [], []
    with Producer({"bootstrap.servers": servers, "message.max.bytes": 1000}) as p:
        messages = [{"value": b"v0", "key": b"k0"}, {"value": b"v1", "partition": 2, "timestamp": 1_700_000_000_000},
                    {"value": b"v2", "headers": [("h", b"x")], "callback": lambda err, msg: errors.append(msg.value())},
                    {"value": b"x" * 5000}]
        n = p.produce_batch(topic_name, messages, on_delivery=lambda err, msg: reports.append((err, msg)))
        assert n == 3 and messages[3]["_error"].code() == KafkaError.MSG_SIZE_TOO_LARGE
        assert "_error" not in messages[0]
        assert p.flush(30) == 0
    assert sorted(m.value() for _, m in reports) == [b"v0", b"v1"] and errors == [b"v2"]
    by_value = {m.value(): m for _, m in reports}
    assert by_value[b"v1"].partition() == 2 and by_value[b"v1"].timestamp()[1] == 1_700_000_000_000
    with Consumer({"bootstrap.servers": servers, "group.id": topic_name, "auto.offset.reset": "earliest"}) as c:
        c.subscribe([topic_name])
        got = set()
        while len(got) < 3 and (msg := c.poll(10)) is not None:
            got.add(msg.value())
    assert got == {b"v0", b"v1", b"v2"}


def test_serializing_producer_and_deserializing_consumer(shared_broker, topic_name):
    servers = shared_broker.bootstrap
    _create(servers, topic_name)
    p = SerializingProducer({"bootstrap.servers": servers, "key.serializer": IntegerSerializer(),
                             "value.serializer": JSONSerializer()})
    for i in range(3):
        p.produce(topic_name, key=i, value={"n": i, "name": f"order-{i}"})
    p.flush(30)
    c = DeserializingConsumer({"bootstrap.servers": servers, "group.id": topic_name, "auto.offset.reset": "earliest",
                               "key.deserializer": IntegerDeserializer(), "value.deserializer": JSONDeserializer(),
                               "enable.partition.eof": True})
    c.subscribe([topic_name])
    got = []
    try:
        while True:
            msg = c.poll(10.0)
            assert msg is not None
            got.append((msg.key(), msg.value()))
    except ConsumeError as e:
        assert e.code == KafkaError._PARTITION_EOF and e.kafka_message.topic() == topic_name
    finally:
        c.close()
    assert got == [(i, {"n": i, "name": f"order-{i}"}) for i in range(3)]
    s = SerializingProducer({"bootstrap.servers": servers, "value.serializer": StringSerializer()})
    try:
        s.produce(topic_name, value=b"not a str")
        raise AssertionError("a bytes value went through StringSerializer")
    except KafkaException as e:
        assert e.args[0].code() == KafkaError._VALUE_SERIALIZATION
    s.close()
    assert StringDeserializer()(b"x") == "x"


def test_partitioner_setting_places_keys_as_librdkafka(shared_broker, topic_name):
    servers = shared_broker.bootstrap
    _create(servers, topic_name, partitions=5)
    placed = {}
    with Producer({"bootstrap.servers": servers, "partitioner": "consistent"}) as p:
        for key in (b"alpha", b"beta", b"gamma", None):
            p.produce(topic_name, key=key, value=b"v", on_delivery=lambda err, msg: placed.update({msg.key(): msg}))
        p.flush(30)
    assert {k: m.partition() for k, m in placed.items()} == {k: zlib.crc32(k or b"") % 5
                                                             for k in (b"alpha", b"beta", b"gamma", None)}
