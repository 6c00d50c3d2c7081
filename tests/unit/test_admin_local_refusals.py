"""What the admin client refuses before sending anything, and where it sends the rest, as
confluent-kafka and librdkafka do: a partition named twice in ``delete_records`` or the group
offset calls (librdkafka fails the whole call with ``_INVALID_ARG``; Riverlog used to keep the
last offset and delete or commit it), ``incremental_alter_configs`` entries that confluent-kafka's
argument parsing rejects (an entry without an operation used to be read as SET, a SET of None as
setting ""), and config calls naming a BROKER resource, sent to that broker (they went to any
broker, which refuses another's configs); and ``request_timeout`` as the whole call's deadline,
``_TIMED_OUT`` when no broker answered. No broker: the client's cluster is replaced by one that
records what would have been sent, or its only bootstrap server refuses connections."""
from __future__ import annotations

import pytest

from broker.client.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ElectionType,
                                 NewPartitions, NewTopic, OffsetSpec, ResourceType, TopicPartition)
from broker.client.group_admin import ConsumerGroupTopicPartitions
from broker.errors import KafkaError, KafkaException, NotControllerError


class RecordingCluster:
    """Stands in for the brokers: every call is recorded and refused (non-retriable)."""

    timeout, backoff = 1.0, 0.001

    def __init__(self):
        self.sent = []

    def _refuse(self, what):
        self.sent.append(what)
        raise NotControllerError("recorded, not sent")

    def leader(self, topic, partition):
        return self._refuse(("leader", topic, partition))

    def call_any(self, method, request, timeout=None):
        return self._refuse(method)

    def call(self, method, request, node_id=None, timeout=None):
        return self._refuse((method, node_id))

    def close(self):
        pass


@pytest.fixture
def admin():
    a = AdminClient({"bootstrap.servers": "127.0.0.1:1"})
    real, a.cluster = a.cluster, RecordingCluster()
    a._coordinator = lambda group_id: a.cluster._refuse(("coordinator", group_id))
    yield a
    a.close()
    real.close()


def _invalid_arg(future, message: str) -> None:
    error = future.exception(timeout=10)
    assert error is not None
    assert error.args[0].code() == KafkaError._INVALID_ARG, error
    assert message in str(error)


def test_delete_records_with_a_partition_twice_deletes_nothing(admin):
    fs = admin.delete_records([TopicPartition("orders", 0, 10), TopicPartition("orders", 1, 5),
                               TopicPartition("orders", 0, 1000)])
    assert sorted(fs) == [TopicPartition("orders", 0), TopicPartition("orders", 1)]
    for f in fs.values():
        _invalid_arg(f, "Duplicate partitions not allowed")
    assert admin.cluster.sent == []


def test_alter_group_offsets_with_a_partition_twice_commits_nothing(admin):
    fs = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "billing", [TopicPartition("orders", 0, 5), TopicPartition("orders", 0, 10)])])
    _invalid_arg(fs["billing"], "Duplicate partitions not allowed")
    assert admin.cluster.sent == []


def test_list_group_offsets_with_a_partition_twice_is_refused(admin):
    fs = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "billing", [TopicPartition("orders", 0), TopicPartition("orders", 0)])])
    _invalid_arg(fs["billing"], "Duplicate partitions not allowed")
    assert admin.cluster.sent == []


def _resource(*entries):
    return ConfigResource(ResourceType.TOPIC, "orders", incremental_configs=list(entries))


@pytest.mark.parametrize("resource, error, message", [
    (_resource(ConfigEntry("retention.ms", "1000")), TypeError, "incremental_operation"),
    (_resource(ConfigEntry("retention.ms", "1000", incremental_operation=0)), TypeError, "incremental_operation"),
    (_resource(ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.SET)), TypeError,
     "Expected .value to be str type, not NoneType"),
    (_resource(ConfigEntry("cleanup.policy", None, incremental_operation=AlterConfigOpType.APPEND)), TypeError,
     "Expected .value to be str type"),
    (_resource(ConfigEntry("", "1", incremental_operation=AlterConfigOpType.SET)), ValueError,
     "Config name mustn't be empty"),
    (_resource(), ValueError, "expected non-empty list of ConfigEntry"),
    (_resource("retention.ms=1000"), TypeError, "expected ConfigEntry type in incremental_configs field, index 0"),
    (_resource(ConfigEntry("retention.ms", "1", incremental_operation="NEW_OPERATION")), TypeError,
     "incremental_operation"),
    (_resource(ConfigEntry(None, "1", incremental_operation=AlterConfigOpType.SET)), TypeError, "Expected .name"),
    (_resource(ConfigEntry(5, "1", incremental_operation=AlterConfigOpType.SET)), TypeError, "Expected .name"),
], ids=["no-operation", "int-operation", "set-none", "append-none", "empty-name", "no-entries", "not-an-entry",
        "str-operation", "none-name", "int-name"])
def test_incremental_alter_configs_checks_entries_as_confluent(admin, resource, error, message):
    with pytest.raises(error, match=message.replace(".", r"\.")):
        admin.incremental_alter_configs([resource])
    assert admin.cluster.sent == []


def test_incremental_alter_configs_refuses_a_non_resource_with_type_error(admin):
    """confluent-kafka's ``_make_futures_v2`` (TypeError), not ``describe_configs``' ValueError."""
    with pytest.raises(TypeError):
        admin.incremental_alter_configs([ConfigResource(ResourceType.TOPIC, "orders"), "orders"])


def test_incremental_delete_needs_no_value_and_is_sent(admin):
    r = _resource(ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE))
    fs = admin.incremental_alter_configs([r])
    assert isinstance(fs[r].exception(timeout=10), NotControllerError)
    assert admin.cluster.sent == ["AlterConfigs"]


@pytest.mark.parametrize("total", [0, -1, 100_001])
def test_create_partitions_refuses_a_total_out_of_range_at_the_call(admin, total):
    """librdkafka's ``rd_kafka_NewPartitions_new`` (ValueError in confluent-kafka), not a request."""
    with pytest.raises(ValueError, match="new_total_cnt out of expected range 1..100000"):
        admin.create_partitions([NewPartitions("orders", total)])
    assert admin.cluster.sent == []


def test_describe_configs_of_a_broker_is_sent_to_that_broker(admin):
    node = ConfigResource(ResourceType.BROKER, "2")
    topic = ConfigResource(ResourceType.TOPIC, "orders")
    fs = admin.describe_configs([topic, node])
    assert isinstance(fs[node].exception(timeout=10), NotControllerError)
    assert admin.cluster.sent == [("DescribeConfigs", 2)]


def test_config_calls_without_a_broker_resource_go_to_any_broker(admin):
    topic = ConfigResource(ResourceType.TOPIC, "orders", set_config={"retention.ms": "1000"})
    admin.describe_configs([topic])[topic].exception(timeout=10)
    admin.alter_configs([topic])[topic].exception(timeout=10)
    assert admin.cluster.sent == ["DescribeConfigs", "AlterConfigs"]


@pytest.mark.parametrize("names, code, message", [
    (["1", "2"], KafkaError._CONFLICT, "Only one ConfigResource of type BROKER is allowed per call"),
    (["one"], KafkaError._INVALID_ARG, "Expected an int32 broker_id for ConfigResource(type=BROKER, name=one)"),
    ([""], KafkaError._INVALID_ARG, "Expected an int32 broker_id"),
], ids=["two-brokers", "not-an-id", "empty"])
@pytest.mark.parametrize("call", ["describe_configs", "alter_configs", "incremental_alter_configs"])
def test_config_calls_refuse_broker_resources_librdkafka_cannot_route(admin, names, code, message, call):
    resources = [ConfigResource(ResourceType.BROKER, n, incremental_configs=[
        ConfigEntry("log.retention.ms", "1", incremental_operation=AlterConfigOpType.SET)]) for n in names]
    fs = getattr(admin, call)(resources)
    for f in fs.values():
        error = f.exception(timeout=10)
        assert error.args[0].code() == code
        assert message in str(error)
    assert admin.cluster.sent == []


def test_elect_leaders_with_a_partition_twice_is_refused(admin):
    f = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("orders", 0), TopicPartition("orders", 0)])
    _invalid_arg(f, "Duplicate partitions specified")
    assert admin.cluster.sent == []


@pytest.mark.parametrize("partitions, error", [
    ((TopicPartition("orders", 0),), TypeError), (["orders"], TypeError), ([TopicPartition("orders", -1)], ValueError),
], ids=["tuple", "str", "negative"])
def test_elect_leaders_checks_partitions_as_confluent(admin, partitions, error):
    with pytest.raises(error):
        admin.elect_leaders(ElectionType.PREFERRED, partitions)
    assert admin.cluster.sent == []


@pytest.mark.parametrize("request_, error, message", [
    (ConsumerGroupTopicPartitions("billing", []), ValueError, "'topic_partitions' cannot be empty"),
    (ConsumerGroupTopicPartitions("billing", [TopicPartition("orders", 0, 42)]), ValueError,
     "must not have 'offset' value"),
    (ConsumerGroupTopicPartitions("billing", [TopicPartition("orders", -1)]), ValueError, "negative 'partition'"),
    (ConsumerGroupTopicPartitions("", None), ValueError, "'group_id' cannot be empty"),
    (ConsumerGroupTopicPartitions(None, None), TypeError, "'group_id' cannot be None"),
], ids=["empty-means-none-not-all", "offset", "negative", "empty-group", "no-group"])
def test_list_group_offsets_checks_the_request_as_confluent(admin, request_, error, message):
    """An empty list used to ask for every partition of the group (what None asks for)."""
    with pytest.raises(error, match=message):
        admin.list_consumer_group_offsets([request_])
    assert admin.cluster.sent == []


@pytest.fixture
def unreachable_admin():
    """An admin client whose only bootstrap server refuses connections (nothing listens on port 1)."""
    with AdminClient({"bootstrap.servers": "127.0.0.1:1"}) as a:
        yield a


def _timed_out(future) -> None:
    error = future.exception(timeout=10)   # well past request_timeout, well before the default 30 s
    assert error is not None and error.args[0].code() == KafkaError._TIMED_OUT, error


@pytest.mark.parametrize("call", [
    lambda a: a.delete_records([TopicPartition("orders", 0, 1)], request_timeout=0.5),
    lambda a: a.list_offsets({TopicPartition("orders", 0): OffsetSpec.latest()}, request_timeout=0.5),
    lambda a: a.create_topics([NewTopic("orders", 1, 1)], request_timeout=0.5),
], ids=["delete_records", "list_offsets", "create_topics"])
def test_request_timeout_bounds_the_whole_call_and_times_out_as_librdkafka(unreachable_admin, call):
    """No broker answers: every future fails ``_TIMED_OUT`` once ``request_timeout`` (which covers the
    leader's lookup too) has passed. The partition calls used to look the leader up within the
    client's default timeout, and every call failed NETWORK_EXCEPTION."""
    for f in call(unreachable_admin).values():
        _timed_out(f)


@pytest.mark.parametrize("call", ["describe_consumer_groups", "delete_consumer_groups"])
def test_a_group_named_twice_is_refused(admin, call):
    fs = getattr(admin, call)(["billing", "audit", "billing"])
    assert sorted(fs) == ["audit", "billing"]
    for f in fs.values():
        _invalid_arg(f, "Duplicate groups not allowed")
    assert admin.cluster.sent == []


@pytest.mark.parametrize("call", [
    lambda a: a.describe_cluster(request_timeout=-1),
    lambda a: a.elect_leaders(ElectionType.PREFERRED, None, request_timeout=-1),
    lambda a: a.describe_consumer_groups(["billing"], request_timeout=-1),
    lambda a: a.list_consumer_groups(request_timeout=3601),
], ids=["describe_cluster", "elect_leaders", "describe_consumer_groups", "list_consumer_groups"])
def test_every_call_checks_its_request_timeout_as_confluent(admin, call):
    """confluent-kafka's option check (librdkafka's 0..3600 s): a ValueError at the call, not a
    deadline already past."""
    with pytest.raises(ValueError, match="request_timeout"):
        call(admin)
    assert admin.cluster.sent == []


def test_describe_topics_with_a_topic_named_twice_fails_every_future_unsent():
    # librdkafka's rd_kafka_DescribeTopics: "Duplicate topics not allowed" (the name was deduplicated)
    from broker.client.model import TopicCollection
    with AdminClient({"bootstrap.servers": "127.0.0.1:1"}) as admin:
        futures = admin.describe_topics(TopicCollection(["orders", "orders"]))
        assert list(futures) == ["orders"]
        with pytest.raises(KafkaException) as raised:
            futures["orders"].result(1)
    assert raised.value.args[0].code() == KafkaError._INVALID_ARG and "Duplicate topics" in str(raised.value)


@pytest.mark.parametrize("topic, message", [(("t", -5), "num_partitions out of expected range 1..100000"),
                                            (("t", 100_001), "num_partitions"), (("t", 1, -2), "replication_factor"),
                                            (("t", 1, 10_001), "replication_factor out of expected range -1..10000")])
def test_create_topics_refuses_librdkafkas_out_of_range_counts_at_the_call(topic, message):
    with AdminClient({"bootstrap.servers": "127.0.0.1:1"}) as admin:
        with pytest.raises(ValueError, match=message):
            admin.create_topics([NewTopic(*topic)])
