"""KIP-158's topic creation for source connectors against Kafka's ``SourceConnectorConfig``,
``TopicCreationConfig``, ``TopicCreationGroup`` and ``TopicCreationTest``: the keys a source
connector's config is checked for, which group's settings a topic gets, and the topics a source
connector creates when it starts (one broker process)."""
from __future__ import annotations

import pytest

import connect.plugins  # noqa: F401  (registers the built-in plugins)
from connect.config import parse_connector_config, validate
from connect.topic_creation import configured_groups, create_topics, group_for, topics_known_at_start

_SOURCE = {"name": "lines", "connector.class": "FileStreamSource", "file": "/tmp/in.txt", "topic": "lines"}
_DEFAULTS = {"topic.creation.default.replication.factor": "1", "topic.creation.default.partitions": "3"}


def _groups(**extra):
    config = parse_connector_config({**_SOURCE, **extra})
    return configured_groups(config.values, config.originals)


@pytest.mark.unit
def test_a_source_using_topic_creation_needs_the_default_groups_replication_factor_and_partitions():
    # TopicCreationConfig.defaultGroupConfigDef: both NO_DEFAULT_VALUE, required once any
    # topic.creation. key is set; a connector without one is not checked (creates nothing)
    assert validate(_SOURCE).errors() == {}
    assert _groups() == []
    errors = validate({**_SOURCE, "topic.creation.default.partitions": "0"}).errors()
    assert errors == {
        "topic.creation.default.replication.factor": [
            'Missing required configuration "topic.creation.default.replication.factor" which has no default value.'],
        "topic.creation.default.partitions": [
            "Invalid value 0 for configuration topic.creation.default.partitions: Number of partitions must be "
            "positive, or -1 to use the broker's default"]}
    errors = validate({**_SOURCE, **_DEFAULTS, "topic.creation.default.replication.factor": "0",
                       "topic.creation.groups": "a,a"}).errors()
    assert errors == {
        "topic.creation.default.replication.factor": [
            "Invalid value 0 for configuration topic.creation.default.replication.factor: Replication factor must "
            "be positive and not larger than the number of brokers in the Kafka cluster, or -1 to use the broker's "
            "default"],
        "topic.creation.groups": [
            "Invalid value [a, a] for configuration topic.creation.groups: Duplicate alias provided."]}
    assert "topic.creation.default.partitions" in validate(
        {**_SOURCE, "topic.creation.groups": "x"}).errors()     # the groups key alone uses topic creation too


@pytest.mark.unit
def test_a_groups_patterns_are_checked_and_its_sizes_default_to_the_default_groups():
    errors = validate({**_SOURCE, **_DEFAULTS, "topic.creation.groups": "audit",
                       "topic.creation.audit.include": "audit(.*"}).errors()
    (message,) = errors["topic.creation.audit.include"]
    assert message.startswith("Invalid value [audit(.*] for configuration topic.creation.audit.include: Syntax error "
                              "in regular expression"), message
    infos = validate({**_SOURCE, **_DEFAULTS, "topic.creation.groups": "audit"}).to_json()
    assert {"Topic Creation", "default", "Topic Creation: audit"} <= set(infos["groups"])
    (audit,) = _groups(**_DEFAULTS, **{"topic.creation.groups": "audit"})[:1]
    assert (audit.name, audit.replication_factor, audit.partitions) == ("audit", 1, 3)


@pytest.mark.unit
def test_the_first_listed_group_matching_a_topic_gives_its_settings_else_the_default():
    # TopicCreationTest: exclusion wins over inclusion, whole names match, listed order decides,
    # 'default' listed in topic.creation.groups is the default group; other keys are topic configs
    groups = _groups(**_DEFAULTS, **{
        "topic.creation.groups": "default, audit, logs",
        "topic.creation.audit.include": "audit\\..*, orders", "topic.creation.audit.exclude": "audit\\.skip",
        "topic.creation.audit.partitions": "1", "topic.creation.audit.retention.ms": "1000",
        "topic.creation.logs.include": ".*", "topic.creation.logs.replication.factor": "-1",
        "topic.creation.default.cleanup.policy": "compact",
        "topic.creation.default.include": "nothing",        # ignored: the default group takes every topic
    })
    assert [g.name for g in groups] == ["audit", "logs", "default"]
    assert group_for(groups, "audit.eu").name == "audit"
    assert group_for(groups, "orders").name == "audit"
    assert group_for(groups, "audit.skip").name == "logs"
    assert group_for(groups, "my-orders").name == "logs"      # not a whole-name match of audit's
    audit, logs, default = groups
    assert (audit.partitions, audit.replication_factor, dict(audit.configs)) == (1, 1, {"retention.ms": "1000"})
    assert (logs.partitions, logs.replication_factor) == (3, -1)
    assert dict(default.configs) == {"cleanup.policy": "compact"} and default.matches("anything")
    only_default = _groups(**_DEFAULTS)
    assert [g.name for g in only_default] == ["default"] and group_for(only_default, "x").partitions == 3


@pytest.mark.unit
def test_a_regex_router_gives_the_declared_topic_its_new_name():
    plain = parse_connector_config({**_SOURCE, **_DEFAULTS})
    assert topics_known_at_start(["lines"], plain.transforms) == ["lines"]
    routed = parse_connector_config({**_SOURCE, **_DEFAULTS, "transforms": "route",
                                     "transforms.route.type": "RegexRouter", "transforms.route.regex": "(.*)",
                                     "transforms.route.replacement": "x-$1"})
    assert topics_known_at_start(["lines"], routed.transforms) == ["x-lines"]   # created under its new name


@pytest.mark.integration
def test_the_topics_a_source_names_are_created_with_their_groups_settings(shared_broker, topic_name):
    from broker.client import AdminClient, NewTopic
    from broker.client.admin import ConfigResource
    wanted, audit, existing = f"{topic_name}-a", f"audit.{topic_name}", f"{topic_name}-old"
    client = {"bootstrap.servers": shared_broker.bootstrap}
    with AdminClient(client) as admin:
        admin.create_topics([NewTopic(existing, 1, 1)])[existing].result(30)
    groups = _groups(**{"topic.creation.default.replication.factor": "1", "topic.creation.default.partitions": "4",
                        "topic.creation.default.cleanup.policy": "compact", "topic.creation.groups": "audit",
                        "topic.creation.audit.include": "audit\\..*", "topic.creation.audit.partitions": "2"})
    assert create_topics(client, groups, [wanted, audit, existing, wanted]) == [wanted, audit]
    with AdminClient(client) as admin:
        topics = admin.list_topics(timeout=30).topics
        assert len(topics[wanted].partitions) == 4 and len(topics[audit].partitions) == 2
        assert len(topics[existing].partitions) == 1            # an existing topic is left as it is
        resource = ConfigResource("topic", wanted)
        described = admin.describe_configs([resource])[resource].result(30)
        assert described["cleanup.policy"].value == "compact"
    assert create_topics(client, groups, [wanted]) == []       # created once


@pytest.mark.integration
def test_a_topic_that_cannot_be_made_fails_with_kafkas_message(shared_broker, topic_name):
    from connect.errors import ConnectError
    client = {"bootstrap.servers": shared_broker.bootstrap}
    groups = _groups(**{"topic.creation.default.replication.factor": "3", "topic.creation.default.partitions": "1"})
    with pytest.raises(ConnectError) as failed:
        create_topics(client, groups, [topic_name])
    assert str(failed.value).startswith(f"Task failed to create new topic {topic_name} (group 'default': 1 partitions, "
                                        "replication factor 3): "), str(failed.value)


@pytest.mark.unit
def test_the_postgres_source_names_the_topics_of_the_tables_it_lists_literally():
    from connect.connector import ConnectorContext
    from connect.postgres_cdc_source import PostgresCdcSource
    config = parse_connector_config({
        "name": "shop-cdc", "connector.class": "PostgresCdcSource", "database.hostname": "127.0.0.1",
        "database.dbname": "shop", "topic.prefix": "shop", "schema.exclude.list": "inventory",
        "table.include.list": "public.customers, public\\.orders, inventory.items, public.order_.*, public.Mixed"})
    source = PostgresCdcSource(config, ConnectorContext(None, "127.0.0.1:9092"))
    # a pattern, an excluded schema and a name PostgreSQL would not fold to lowercase create nothing up front
    assert source.output_topics() == ["shop.public.customers", "shop.public.orders"]


@pytest.mark.integration
@pytest.mark.parametrize("enabled", ["true", "false"])
def test_the_worker_creates_a_sources_topics_unless_topic_creation_is_disabled(shared_broker, topic_name, enabled):
    # Worker.isTopicCreationEnabled: the worker's topic.creation.enable and the connector's settings
    from broker.client import AdminClient

    from connect.config import with_worker_client_defaults
    from connect.connector import ConnectorContext
    from connect.file_stream import FileStreamSource
    from connect.worker import Worker
    from connect.worker_connector import _Connector
    bootstrap = shared_broker.bootstrap
    worker = Worker(None, {"bootstrap.servers": bootstrap, "group.id": "g", "topic.creation.enable": enabled})
    c = _Connector("lines")
    c.config = with_worker_client_defaults(parse_connector_config({**_SOURCE, **_DEFAULTS, "topic": topic_name}),
                                           worker.config)
    c.plugin = FileStreamSource(c.config, ConnectorContext(None, bootstrap))
    worker._create_topics(c)
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        topics = admin.list_topics(timeout=30).topics
    if enabled == "true":
        assert len(topics[topic_name].partitions) == 3
    else:
        assert topic_name not in topics
