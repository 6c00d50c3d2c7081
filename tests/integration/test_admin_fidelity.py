"""The admin client and the broker's group and topic requests answer as Kafka and confluent-kafka do.

Each test names the upstream rule it checks; each failed before its fix.
"""
from __future__ import annotations

import time

import pytest

from broker.client import OFFSET_INVALID, AdminClient, Consumer, NewTopic, Producer, TopicPartition
from broker.client.admin import (AlterConfigOpType, ConfigEntry, ConfigResource, ConsumerGroupState,
                                 ConsumerGroupTopicPartitions, NewPartitions, ResourceType, TopicCollection)
from broker.errors import (InvalidRequestError, InvalidTopicError, KafkaError, KafkaException,
                           TopicAlreadyExistsError, UnknownTopicOrPartitionError)
from tests.conftest import BrokerProcess, wait_until
from tests.integration.test_cli import run_cli

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(str(tmp_path_factory.mktemp("admin-fidelity")), {"offsets.topic.num.partitions": 2}).start()
    yield b
    b.kill9()


@pytest.fixture
def admin(broker):
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as a:
        yield a


def _create(admin, name: str, partitions: int = 1) -> None:
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def _committed(admin, group: str, tps) -> dict:
    found = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group, list(tps))])[group].result(30)
    return {(tp.topic, tp.partition): tp.offset for tp in found.topic_partitions}


def _alter(admin, group: str, tps):
    return admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, list(tps))])[group].result(30)


# ------------------------------------------------------------------------------ offset commits
def test_offsets_for_a_topic_or_partition_the_cluster_lacks_are_refused_and_not_stored(admin, broker, topic_name):
    """Kafka's handleOffsetCommitRequest: UNKNOWN_TOPIC_OR_PARTITION per partition, nothing stored;
    a group committing for a topic not created yet used to skip that topic's first records. The
    result answers per partition, as librdkafka's: the group's future resolves, each
    TopicPartition's ``error`` says what became of it."""
    _create(admin, topic_name)
    later = f"{topic_name}-later"
    [future] = _alter(admin, "g-future", [TopicPartition(later, 0, 3)]).topic_partitions
    assert future.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART and "does not exist" in future.error.str()
    assert isinstance(future.error.exception(), UnknownTopicOrPartitionError)
    kept, missing = _alter(admin, "g-partition", [TopicPartition(topic_name, 5, 1), TopicPartition(topic_name, 0, 2)]
                           ).topic_partitions
    assert (kept.partition, kept.offset, kept.error) == (0, 2, None)
    assert (missing.partition, missing.offset) == (5, 1) and "partition 5 does not exist" in missing.error.str()
    # the partitions that exist are committed; the others answer OFFSET_INVALID
    assert _committed(admin, "g-partition", [TopicPartition(topic_name, 0), TopicPartition(topic_name, 5)]) == \
        {(topic_name, 0): 2, (topic_name, 5): OFFSET_INVALID}
    _create(admin, later)
    with Producer({"bootstrap.servers": broker.bootstrap}) as p:
        for i in range(5):
            p.produce(later, b"v%d" % i)
        assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g-future", "auto.offset.reset": "earliest"})
    c.subscribe([later])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 5 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.offset())
    c.close()
    assert got == [0, 1, 2, 3, 4]


def test_a_consumer_commit_for_a_deleted_topic_fails_within_its_timeout(admin, broker, topic_name):
    """UNKNOWN_TOPIC_OR_PARTITION is retriable, so the consumer's commit retries it (as the Java
    consumer does) but only until request.timeout.ms; nothing is stored."""
    _create(admin, topic_name)
    admin.delete_topics([topic_name])[topic_name].result(30)
    wait_until(lambda: topic_name not in admin.list_topics(timeout=10).topics, 30, 0.1, "the topic gone")
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"{topic_name}-g", "request.timeout.ms": 2000})
    start = time.monotonic()
    with pytest.raises(KafkaException) as refused:
        c.commit(offsets=[TopicPartition(topic_name, 0, 7)], asynchronous=False)
    took = time.monotonic() - start
    c.close()
    assert refused.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert took < 10, took
    assert _committed(admin, f"{topic_name}-g", [TopicPartition(topic_name, 0)]) == {(topic_name, 0): OFFSET_INVALID}


def test_offsets_sent_to_a_transaction_for_an_unknown_topic_are_refused(admin, broker, topic_name):
    """Kafka's handleTxnOffsetCommitRequest: UNKNOWN_TOPIC_OR_PARTITION, and nothing pending to commit.
    librdkafka retries it until the call's timeout, then the transaction must abort."""
    _create(admin, topic_name)
    group = f"{topic_name}-g"
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": topic_name})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic_name, b"x")
    with pytest.raises(KafkaException) as refused:
        p.send_offsets_to_transaction([TopicPartition(f"{topic_name}-none", 0, 4)], c.consumer_group_metadata(), 5)
    assert refused.value.args[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert refused.value.args[0].txn_requires_abort()
    p.abort_transaction(30)
    p.begin_transaction()
    p.send_offsets_to_transaction([TopicPartition(topic_name, 0, 1)], c.consumer_group_metadata(), 30)
    p.commit_transaction(30)
    p.close()
    c.close()
    assert _committed(admin, group, [TopicPartition(topic_name, 0), TopicPartition(f"{topic_name}-none", 0)]) == \
        {(topic_name, 0): 1, (f"{topic_name}-none", 0): OFFSET_INVALID}


def test_alter_offsets_checks_its_request_as_confluent_kafka(admin, topic_name):
    """confluent-kafka's _check_alter_consumer_group_offsets_request: a negative offset (stored, it
    made the group stall or skip) or an empty partition list is a ValueError at the call."""
    _create(admin, topic_name)
    with pytest.raises(ValueError, match="must not have negative value for 'offset' field"):
        _alter(admin, "g-negative", [TopicPartition(topic_name, 0, -5)])
    with pytest.raises(ValueError, match="'topic_partitions' cannot be empty"):
        _alter(admin, "g-negative", [])
    with pytest.raises(ValueError, match="negative value for 'partition' field"):
        _alter(admin, "g-negative", [TopicPartition(topic_name, -1, 0)])
    assert _committed(admin, "g-negative", [TopicPartition(topic_name, 0)]) == {(topic_name, 0): OFFSET_INVALID}


# ------------------------------------------------------------------------------ describing groups
def test_an_unknown_or_deleted_group_is_described_dead(admin, topic_name):
    """Kafka's DescribeGroups: a group that does not exist is Dead with no members (it raised
    GROUP_ID_NOT_FOUND); the CLI still says the group does not exist, as kafka-consumer-groups."""
    d = admin.describe_consumer_groups([f"{topic_name}-none"])[f"{topic_name}-none"].result(30)
    assert (d.state, d.members, d.group_id) == (ConsumerGroupState.DEAD, [], f"{topic_name}-none")
    _create(admin, topic_name)
    group = f"{topic_name}-g"
    _alter(admin, group, [TopicPartition(topic_name, 0, 0)])
    assert admin.describe_consumer_groups([group])[group].result(30).state == ConsumerGroupState.EMPTY
    assert admin.delete_consumer_groups([group])[group].result(30) is None
    assert admin.describe_consumer_groups([group])[group].result(30).state == ConsumerGroupState.DEAD


def test_the_cli_says_a_missing_group_does_not_exist(broker, topic_name):
    out = run_cli(broker.bootstrap, "groups", "describe", f"{topic_name}-none", check=False)
    assert out.returncode == 0, (out.stdout, out.stderr)   # kafka-consumer-groups.sh's printError does not exit
    assert f"Consumer group '{topic_name}-none' does not exist." in out.stderr
    assert "GROUP_ID_NOT_FOUND" in out.stderr


def test_listed_partitions_are_all_answered(admin, topic_name):
    """Kafka's OffsetFetch and confluent-kafka: every partition asked for comes back, OFFSET_INVALID
    where the group committed nothing (those used to be left out)."""
    _create(admin, topic_name, 2)
    group = f"{topic_name}-g"
    _alter(admin, group, [TopicPartition(topic_name, 0, 4)])
    asked = [TopicPartition(topic_name, 0), TopicPartition(topic_name, 1), TopicPartition("elsewhere", 0)]
    assert _committed(admin, group, asked) == {(topic_name, 0): 4, (topic_name, 1): OFFSET_INVALID,
                                               ("elsewhere", 0): OFFSET_INVALID}


# ------------------------------------------------------------------------------ topics
def test_names_colliding_on_dot_and_underscore_are_refused(admin, topic_name):
    """Kafka's ReplicationControlManager.validateNewTopicNames (Topic.hasCollisionChars)."""
    base = topic_name.replace("-", "")[:40]
    dotted, underscored = f"{base}.x", f"{base}_x"
    _create(admin, dotted)
    with pytest.raises(InvalidTopicError, match=f"Topic '{underscored}' collides with existing topic: {dotted}"):
        admin.create_topics([NewTopic(underscored, 1, 1)])[underscored].result(30)
    with pytest.raises(InvalidTopicError, match="collides"):
        admin.create_topics([NewTopic(underscored, 1, 1)], validate_only=True)[underscored].result(30)
    with pytest.raises(TopicAlreadyExistsError):     # the topic itself: it exists, which Kafka says first
        admin.create_topics([NewTopic(dotted, 1, 1)])[dotted].result(30)
    first, second = f"{base}.y", f"{base}_y"        # two in one request: the second collides with the first
    fs = admin.create_topics([NewTopic(first, 1, 1), NewTopic(second, 1, 1)])
    fs[first].result(30)
    with pytest.raises(InvalidTopicError, match=f"collides with existing topic: {first}"):
        fs[second].result(30)
    fs = admin.create_topics([NewTopic(f"{base}.z", 1, 1), NewTopic(f"{base}_z", 1, 1)], validate_only=True)
    fs[f"{base}.z"].result(30)
    with pytest.raises(InvalidTopicError):
        fs[f"{base}_z"].result(30)
    assert underscored not in admin.list_topics(timeout=10).topics


def test_a_name_twice_in_one_request_is_refused_and_not_acted_on(admin, topic_name):
    """Kafka's ControllerApis: INVALID_REQUEST "Duplicate topic name." for createTopics,
    deleteTopics and createPartitions; the first of the two used to be created."""
    fs = admin.create_topics([NewTopic(topic_name, 1, 1), NewTopic(topic_name, 2, 1)])
    with pytest.raises(InvalidRequestError, match="Duplicate topic name."):
        fs[topic_name].result(30)
    assert topic_name not in admin.list_topics(timeout=10).topics
    _create(admin, topic_name)
    fs = admin.create_partitions([NewPartitions(topic_name, 2), NewPartitions(topic_name, 3)])
    with pytest.raises(InvalidRequestError, match="Duplicate topic name."):
        fs[topic_name].result(30)
    with pytest.raises(InvalidRequestError, match="Duplicate topic name."):
        admin.delete_topics([topic_name, topic_name])[topic_name].result(30)
    assert len(admin.list_topics(topic_name, timeout=10).topics[topic_name].partitions) == 1


def test_names_starting_with_two_underscores_are_topics_like_others(admin, broker, topic_name):
    """Kafka refuses only __cluster_metadata (INVALID_REQUEST); other "__" names were refused with
    POLICY_VIOLATION. They are not internal topics, and a metadata request may auto-create them."""
    name = f"__{topic_name}"
    _create(admin, name)
    described = admin.describe_topics(TopicCollection([name]))[name].result(30)
    assert not described.is_internal
    with pytest.raises(InvalidRequestError, match="Creation of internal topic __cluster_metadata is prohibited."):
        admin.create_topics([NewTopic("__cluster_metadata", 1, 1)])["__cluster_metadata"].result(30)
    auto = f"__{topic_name}-auto"
    with Producer({"bootstrap.servers": broker.bootstrap}) as p:
        p.produce(auto, b"x")
        assert p.flush(30) == 0
    assert auto in admin.list_topics(timeout=10).topics


# ------------------------------------------------------------------------------ configs
def test_a_config_named_twice_in_one_resource_is_refused(admin, topic_name):
    """librdkafka's rd_kafka_IncrementalAlterConfigs: "Duplicate ConfigEntry found" (_INVALID_ARG)."""
    _create(admin, topic_name)
    r = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
        ConfigEntry("retention.ms", "5000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("retention.ms", "6000", incremental_operation=AlterConfigOpType.SET)])
    with pytest.raises(KafkaException) as refused:
        admin.incremental_alter_configs([r])[r].result(30)
    assert refused.value.args[0].code() == KafkaError._INVALID_ARG
    assert "Duplicate ConfigEntry found" in str(refused.value)
    r = ConfigResource(ResourceType.TOPIC, topic_name)
    assert admin.describe_configs([r])[r].result(30)["retention.ms"].value != "6000"


def test_described_configs_carry_their_synonyms_most_specific_first(tmp_path, topic_name):
    """Kafka's ``ConfigHelper.describeConfigs`` with ``include_synonyms`` (librdkafka always asks):
    each config lists where its value could come from, itself included — the topic override, the
    broker setting behind the topic default, the built-in default — and confluent-kafka gives
    them as ``ConfigEntry.synonyms``, a dict by name of ``is_synonym`` entries."""
    b = BrokerProcess(str(tmp_path / "b"), {"log.retention.ms": 3_600_000}).start()
    try:
        with AdminClient({"bootstrap.servers": b.bootstrap}) as admin:
            admin.create_topics([NewTopic(topic_name, 1, 1, config={"segment.bytes": "1048576"})])[topic_name].result(30)
            topic = ConfigResource(ResourceType.TOPIC, topic_name)
            configs = admin.describe_configs([topic])[topic].result(30)
            segment = configs["segment.bytes"]
            assert segment.source == "DYNAMIC_TOPIC_CONFIG" and segment.value == "1048576"
            assert [(s.name, s.value, s.source, s.is_synonym) for s in segment.synonyms.values()] == [
                ("segment.bytes", "1048576", "DYNAMIC_TOPIC_CONFIG", True),
                ("log.segment.bytes", "1073741824", "DEFAULT_CONFIG", True)]
            retention = configs["retention.ms"]
            assert retention.source == "STATIC_BROKER_CONFIG" and retention.value == "3600000"
            assert [(s.name, s.value, s.source) for s in retention.synonyms.values()] == [
                ("log.retention.ms", "3600000", "STATIC_BROKER_CONFIG"),
                ("log.retention.hours", "168", "DEFAULT_CONFIG")]            # Kafka's default key
            # the broker key and the default share a name here: confluent-kafka's dict keeps the last
            assert [(s.name, s.source) for s in configs["cleanup.policy"].synonyms.values()] == [
                ("log.cleanup.policy", "DEFAULT_CONFIG")]
            node = ConfigResource(ResourceType.BROKER, "0")
            broker_configs = admin.describe_configs([node])[node].result(30)
            assert [s.source for s in broker_configs["log.retention.ms"].synonyms.values()] == ["DEFAULT_CONFIG"]
    finally:
        b.kill9()
