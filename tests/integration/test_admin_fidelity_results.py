"""The admin client's result objects have confluent-kafka's field types, so a program ported from
confluent-kafka reads them as it did there (against a real broker process)."""
from __future__ import annotations

import base64
import uuid

import pytest

from broker.client import (OFFSET_INVALID, AdminClient, Consumer, KafkaError, NewTopic, Producer, TopicCollection,
                           TopicPartition)
from broker.client.admin import (CONFIG_SOURCE_DEFAULT_CONFIG, CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG, ConfigResource,
                                 ConfigSource, ConsumerGroupTopicPartitions, ResourceType)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def admin(shared_broker):
    with AdminClient({"bootstrap.servers": shared_broker.bootstrap}) as a:
        yield a


def test_a_groups_coordinator_is_a_node_with_its_address(admin, shared_broker, topic_name):
    """confluent-kafka's ConsumerGroupDescription.coordinator is a Node (Admin.c's
    ``c_Node_to_py(rd_kafka_ConsumerGroupDescription_coordinator(...))``): ported code reads
    ``desc.coordinator.host``/``.port``/``.id``, which an int has not."""
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    group = f"{topic_name}-g"
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [TopicPartition(topic_name, 0, 0)])]
                                       )[group].result(30)
    desc = admin.describe_consumer_groups([group])[group].result(30)
    node = desc.coordinator
    cluster = admin.describe_cluster().result(30)
    assert node.id in [n.id for n in cluster.nodes] and node.id_string == str(node.id)
    assert f"{node.host}:{node.port}" == shared_broker.bootstrap
    assert node == node.id and int(node) == node.id   # as the node id Riverlog's CLI looks brokers up by
    listed = admin.list_groups(group, timeout=30)[0]
    assert listed.broker.id == node.id and listed.broker == shared_broker.bootstrap


def test_config_sources_compare_with_confluents_int_constants(admin, topic_name):
    """confluent-kafka's ConfigEntry.source is librdkafka's int (Admin.c sets ``source`` with
    ``cfl_PyDict_SetInt``) and the module exports CONFIG_SOURCE_* to compare it with: a filter
    for a topic's overrides written that way must find them, not an empty list."""
    admin.create_topics([NewTopic(topic_name, 1, 1, config={"retention.ms": "3600000"})])[topic_name].result(30)
    resource = ConfigResource(ResourceType.TOPIC, topic_name)
    entries = admin.describe_configs([resource])[resource].result(30)
    overrides = [name for name, e in entries.items() if e.source == CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG]
    assert overrides == ["retention.ms"]
    segment = entries["segment.bytes"]
    assert segment.source == CONFIG_SOURCE_DEFAULT_CONFIG and segment.source != CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG
    assert ConfigSource(entries["retention.ms"].source) is ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert int(entries["retention.ms"].source) == CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG
    assert str(entries["retention.ms"]) == 'retention.ms="3600000"'


def test_require_stable_reports_offsets_an_open_transaction_holds(admin, shared_broker, topic_name):
    """KIP-447: with ``require_stable`` the coordinator answers UNSTABLE_OFFSET_COMMIT for a partition
    whose offset an open transaction holds; librdkafka's ListConsumerGroupOffsets hands it back as
    that partition's ``error`` (``rd_kafka_handle_OffsetFetch``), not the offset being replaced.
    The partition's committed leader epoch comes back too, as librdkafka's."""
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    group, tp = f"{topic_name}-g", TopicPartition(topic_name, 0)
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [TopicPartition(topic_name, 0, 2)])]
                                       )[group].result(30)

    def listed(require_stable: bool) -> TopicPartition:
        found = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, [tp])],
                                                  require_stable=require_stable)[group].result(30)
        return found.topic_partitions[0]

    c = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": group})
    p = Producer({"bootstrap.servers": shared_broker.bootstrap, "transactional.id": topic_name})
    try:
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(topic_name, b"x", partition=0)
        p.send_offsets_to_transaction([TopicPartition(topic_name, 0, 7, leader_epoch=0)],
                                      c.consumer_group_metadata(), 30)
        pending = listed(True)
        assert pending.error is not None and pending.error.code() == KafkaError.UNSTABLE_OFFSET_COMMIT, pending
        assert pending.offset == OFFSET_INVALID
        stable = listed(False)
        assert (stable.offset, stable.error) == (2, None)
        p.commit_transaction(30)
        committed = listed(True)
        assert (committed.offset, committed.error, committed.leader_epoch) == (7, None, 0)
    finally:
        p.close()
        c.close()


def test_a_topic_description_carries_its_id_as_a_uuid(admin, topic_name):
    """confluent-kafka's TopicDescription.topic_id is a ``Uuid`` (``get_most_significant_bits()``,
    printed as Kafka's base64 form), not the broker's hex string."""
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    desc = admin.describe_topics(TopicCollection([topic_name]))[topic_name].result(30)
    hex_id = admin.list_topics(topic_name, timeout=30).topics[topic_name].topic_id
    raw = uuid.UUID(hex_id).bytes
    assert desc.topic_id.get_most_significant_bits() == int.from_bytes(raw[:8], "big", signed=True)
    assert desc.topic_id.get_least_significant_bits() == int.from_bytes(raw[8:], "big", signed=True)
    assert str(desc.topic_id) == base64.b64encode(raw).decode()[:22]


def test_altered_offsets_keep_the_leader_epoch_they_were_given(admin, topic_name):
    """librdkafka's AlterConsumerGroupOffsets commits each partition's ``leader_epoch`` (OffsetCommit
    v6+), which a consumer later validates its position with (KIP-320); it was sent as -1."""
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    group = f"{topic_name}-g"
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic_name, 0, 4, leader_epoch=0)])])[group].result(30)
    found = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    assert [(tp.offset, tp.leader_epoch) for tp in found.topic_partitions] == [(4, 0)]


def test_a_group_that_only_had_offsets_committed_is_a_simple_consumer_group(admin, shared_broker, topic_name):
    """Kafka's and librdkafka's rule, in listings and descriptions alike: a group with no protocol
    type (offsets committed, no member ever joined) is simple; one a consumer joined is not, also
    once its member has left."""
    import time
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    simple, joined = f"{topic_name}-simple", f"{topic_name}-joined"
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(simple, [TopicPartition(topic_name, 0, 0)])]
                                       )[simple].result(30)
    c = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": joined})
    c.subscribe([topic_name])
    deadline = time.monotonic() + 30
    while not c.assignment() and time.monotonic() < deadline:
        c.poll(0.2)
    assert c.assignment()
    c.close()

    def flags():
        listed = {g.group_id: g.is_simple_consumer_group for g in admin.list_consumer_groups().result(30).valid}
        described = {g: d.result(30).is_simple_consumer_group
                     for g, d in admin.describe_consumer_groups([simple, joined]).items()}
        return {g: listed.get(g) for g in (simple, joined)}, described
    assert flags() == ({simple: True, joined: False}, {simple: True, joined: False})


def test_a_members_host_is_its_connection_address_as_kafka_prints_it(admin, shared_broker, topic_name):
    """confluent-kafka's MemberDescription.host and list_groups' GroupMember.client_host carry the
    member's client host, "/127.0.0.1" for a consumer on this machine (Kafka's clientHost)."""
    import time
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
    group = f"{topic_name}-g"
    c = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": group})
    c.subscribe([topic_name])
    try:
        deadline = time.monotonic() + 30
        while not c.assignment() and time.monotonic() < deadline:
            c.poll(0.2)
        [member] = admin.describe_consumer_groups([group])[group].result(30).members
        assert member.host == "/127.0.0.1" and member.assignment.topic_partitions
        [listed] = admin.list_groups(group, timeout=30)[0].members
        assert listed.client_host == "/127.0.0.1"
    finally:
        c.close()
