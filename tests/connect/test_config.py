"""Connector config validation: every problem per field, Connect's validate response shape, and
transforms/predicates aliases."""
from __future__ import annotations

import pytest

from connect.config import (CONNECTORS, CONVERTERS, JSON_CONVERTER_CONFIG, PREDICATES, TRANSFORMATIONS,
                            WorkerConfig, parse_connector_config, validate)
from connect.config_def import ConfigDef, ConfigKey, Plugin, Type
from connect.connector import register_connector
from connect.errors import ConfigError
from connect.file_stream import FileStreamSource
from connect.topic_copy import TopicCopy

pytestmark = pytest.mark.unit

DEFINITION_FIELDS = {"name", "type", "required", "default_value", "importance", "documentation", "group",
                     "width", "display_name", "dependents", "order"}
VALUE_FIELDS = {"name", "value", "recommended_values", "errors", "visible"}


@pytest.fixture(autouse=True)
def plugins():
    added = [
        (CONNECTORS, Plugin("test.PgSource", kind="source",
                            config_def=ConfigDef([ConfigKey("slot.name", Type.STRING, group="Postgres")])),
         ["PgSource"]),
        (CONNECTORS, Plugin("test.DeltaSink", kind="sink"), ["DeltaSink"]),
        (CONVERTERS, Plugin("org.apache.kafka.connect.json.JsonConverter", config_def=JSON_CONVERTER_CONFIG), []),
        (TRANSFORMATIONS, Plugin("org.apache.kafka.connect.transforms.InsertField$Value",
                                 config_def=ConfigDef([ConfigKey("static.field", Type.STRING, None)])), []),
        (PREDICATES, Plugin("org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
                            config_def=ConfigDef([ConfigKey("pattern", Type.STRING)])), []),
    ]
    # Only these plugins while a test runs (the real ones register on import, in whatever order the
    # suite's modules were collected), and the registries exactly as they were afterwards.
    registries = (CONNECTORS, CONVERTERS, TRANSFORMATIONS, PREDICATES)
    saved = {r: dict(r._by_name) for r in registries}
    for r in registries:
        r._by_name = {}
    for registry, plugin, aliases in added:
        registry.register(plugin, aliases)
    yield
    for r in registries:
        r._by_name = saved[r]


def sink(**extra):
    return {"name": "delta", "connector.class": "DeltaSink", "topics": "orders", **extra}


def test_a_valid_config_has_no_errors_and_connects_response_shape():
    infos = validate(sink()).to_json()
    assert set(infos) == {"name", "error_count", "groups", "configs"}
    assert infos["name"] == "DeltaSink" and infos["error_count"] == 0
    assert infos["groups"][:4] == ["Common", "Transforms", "Predicates", "Error Handling"]
    for entry in infos["configs"]:
        assert set(entry) == {"definition", "value"}
        assert set(entry["definition"]) == DEFINITION_FIELDS
        assert set(entry["value"]) == VALUE_FIELDS
    by_name = {c["definition"]["name"]: c for c in infos["configs"]}
    assert by_name["tasks.max"]["definition"] | {"documentation": ""} == {
        "name": "tasks.max", "type": "INT", "required": False, "default_value": "1", "importance": "HIGH",
        "documentation": "", "group": "Common", "width": "SHORT", "display_name": "Tasks max",
        "dependents": [], "order": 3}
    assert by_name["tasks.max"]["value"] == {"name": "tasks.max", "value": "1", "recommended_values": [],
                                             "errors": [], "visible": True}
    assert by_name["name"]["definition"]["required"] is True
    assert by_name["name"]["definition"]["default_value"] is None
    assert by_name["transforms"]["value"]["value"] == ""
    assert by_name["errors.deadletterqueue.topic.name"]["definition"]["group"] == "Error Handling"


def test_every_problem_is_listed_on_its_field():
    infos = validate({"connector.class": "DeltaSink", "tasks.max": "0", "errors.tolerance": "some",
                      "errors.retry.timeout": "soon", "errors.log.enable": "yes", "topics": "a",
                      "topics.regex": "a.*"})
    errors = infos.errors()
    assert errors == {
        "name": ['Missing required configuration "name" which has no default value.'],
        "tasks.max": ["Invalid value 0 for configuration tasks.max: Value must be at least 1"],
        "errors.tolerance": ["Invalid value some for configuration errors.tolerance: String must be one of: none, all"],
        "errors.retry.timeout": ["Invalid value soon for configuration errors.retry.timeout: Not a number of type LONG"],
        "errors.log.enable": ["Invalid value yes for configuration errors.log.enable: "
                              "Expected value to be either true or false"],
        "topics": ["topics and topics.regex are mutually exclusive options, but both are set."],
        "topics.regex": ["topics and topics.regex are mutually exclusive options, but both are set."],
    }
    assert infos.error_count == 7
    with pytest.raises(ConfigError) as raised:
        infos.raise_if_invalid()
    assert raised.value.details["errors"] == errors
    assert str(raised.value).startswith("Connector configuration is invalid and contains the following 7 error(s):")


def test_parse_refuses_with_every_problem_and_types_a_good_config():
    with pytest.raises(ConfigError) as raised:
        parse_connector_config(sink(**{"tasks.max": "-1", "name": ""}))
    assert set(raised.value.details["errors"]) == {"tasks.max", "name"}
    config = parse_connector_config(sink(**{"tasks.max": "3", "errors.retry.timeout": "-1",
                                            "producer.override.linger.ms": "5",
                                            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                                            "value.converter.schemas.enable": "false"}))
    assert (config.name, config.kind, config.tasks_max, config.errors_retry_timeout_ms) == ("delta", "sink", 3, -1)
    assert config.connector_class == "test.DeltaSink"
    assert config.converter_config("value") == {"schemas.enable": "false"}
    assert config.producer_overrides == {"linger.ms": "5"}


def test_a_sinks_max_poll_records_bounds_its_batch_and_other_consumer_overrides_reach_the_client():
    config = parse_connector_config(sink(**{"consumer.override.max.poll.records": "100",
                                            "consumer.override.fetch.max.bytes": "1048576"}))
    assert config.reader_options() == {"maxOffsetsPerTrigger": "100", "riverlog.fetch.max.bytes": "1048576"}
    for bad, why in (("0", "Value must be at least 1"), ("many", "Not a number of type INT")):
        assert validate(sink(**{"consumer.override.max.poll.records": bad})).errors() == {
            "consumer.override.max.poll.records": [f"Invalid value {bad} for configuration max.poll.records: {why}"]}
    # TopicCopy reads topics as a sink does; a source reading none ignores consumer settings, as Kafka's.
    register_connector(TopicCopy)
    register_connector(FileStreamSource)
    copy = {"name": "c", "connector.class": "TopicCopy", "topics": "orders", "consumer.override.max.poll.records": "0"}
    assert list(validate(copy).errors()) == ["consumer.override.max.poll.records"]
    assert parse_connector_config({**copy, "consumer.override.max.poll.records": "7"}).reader_options() == \
        {"maxOffsetsPerTrigger": "7"}
    assert validate({"name": "f", "connector.class": "FileStreamSource", "file": "/tmp/in.txt", "topic": "t",
                     "consumer.override.max.poll.records": "0"}).errors() == {}


def test_null_values_are_refused_as_connect_refuses_them():
    assert validate(sink(**{"tasks.max": None})).errors() == {
        "tasks.max": ["Null value can not be supplied as the configuration value."]}


def test_an_unknown_connector_class_is_listed_and_the_rest_still_validated():
    errors = validate({"name": "x", "connector.class": "Nope", "tasks.max": "x"}).errors()
    # Kafka's Plugins.newConnector message, every connector there is listed
    assert errors == {"connector.class": [
        "Failed to find any class that implements Connector and which name matches Nope, available connectors are: "
        "PluginDesc{klass=class test.DeltaSink, name='test.DeltaSink', version='undefined', "
        "encodedVersion=undefined, type=sink, typeName='sink', location='classpath'}, "
        "PluginDesc{klass=class test.PgSource, name='test.PgSource', version='undefined', "
        "encodedVersion=undefined, type=source, typeName='source', location='classpath'}"],
                      "tasks.max": ["Invalid value x for configuration tasks.max: Not a number of type INT"]}


def test_sinks_need_topics_and_keep_the_dlq_out_of_them():
    assert validate({"name": "d", "connector.class": "DeltaSink"}).errors() == {
        "topics": ["Must configure one of topics or topics.regex"],
        "topics.regex": ["Must configure one of topics or topics.regex"]}
    errors = validate(sink(**{"errors.deadletterqueue.topic.name": "orders"})).errors()
    assert errors == {"topics": ["The DLQ topic 'orders' may not be included in the list of topics "
                                 "('topics=[orders]') consumed by the connector"]}


def test_the_dead_letter_queue_is_for_sink_connectors_only():
    infos = validate({"name": "pg", "connector.class": "PgSource", "slot.name": "s",
                      "errors.deadletterqueue.topic.name": "dlq"})
    assert list(infos.errors()) == ["errors.deadletterqueue.topic.name"]
    entry = next(c for c in infos.to_json()["configs"]
                 if c["value"] and c["value"]["name"] == "errors.deadletterqueue.topic.name")
    assert entry["definition"] is None  # sources have no such key, as in Kafka
    names = {c["definition"]["name"] for c in validate(sink()).to_json()["configs"] if c["definition"]}
    assert {"errors.deadletterqueue.topic.name", "errors.deadletterqueue.context.headers.enable"} <= names


def test_a_connectors_own_keys_and_groups_are_included():
    infos = validate({"name": "pg", "connector.class": "PgSource"})
    assert infos.errors() == {"slot.name": ['Missing required configuration "slot.name" which has no default value.']}
    assert "Postgres" in infos.groups and "Exactly Once Support" in infos.groups


def test_transforms_and_predicates_are_expanded_per_alias():
    config = sink(**{"transforms": "add,drop", "transforms.add.type": "org.apache.kafka.connect.transforms.InsertField$Value",
                     "transforms.add.static.field": "src", "transforms.add.predicate": "isOrders",
                     "transforms.add.negate": "true", "transforms.drop.type": "com.example.Missing",
                     "predicates": "isOrders",
                     "predicates.isOrders.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
                     "predicates.isOrders.pattern": "orders"})
    infos = validate(config)
    assert infos.errors() == {"transforms.drop.type": [
        "Invalid value com.example.Missing for configuration transforms.drop.type: "
        "Class com.example.Missing could not be found."]}
    assert {"Transforms: add", "Transforms: drop", "Predicates: isOrders"} <= set(infos.groups)
    by_name = {c["definition"]["name"]: c for c in infos.to_json()["configs"] if c["definition"]}
    assert by_name["transforms.add.type"]["definition"]["required"] is True
    assert by_name["transforms.add.type"]["value"]["recommended_values"] == [
        "org.apache.kafka.connect.transforms.InsertField$Value"]
    assert by_name["transforms.add.static.field"]["value"]["value"] == "src"
    assert by_name["predicates.isOrders.pattern"]["definition"]["group"] == "Predicates: isOrders"
    parsed = parse_connector_config({**config, "transforms": "add"})
    (add,) = parsed.transforms
    assert (add.alias, add.predicate, add.negate, dict(add.config)) == ("add", "isOrders", True, {"static.field": "src"})
    assert parsed.predicates[0].config == {"pattern": "orders"}


def test_alias_problems_are_listed_on_their_fields():
    errors = validate(sink(**{"transforms": "a,a,b", "transforms.b.predicate": "nope", "transforms.a.negate": "true",
                              "predicates": "p", "predicates.p.pattern": "x"})).errors()
    assert errors["transforms"] == ["Invalid value [a, a, b] for configuration transforms: Duplicate alias provided."]
    assert errors["transforms.a.type"] == ['Missing required configuration "transforms.a.type" which has no default value.']
    assert errors["transforms.b.predicate"] == [
        "Invalid value nope for configuration transforms.b.predicate: there is no predicate 'nope' in 'predicates' "
        "(aliases there: p)"]
    assert errors["transforms.a.negate"] == [
        "Config 'transforms.a.negate' was provided but there is no config 'transforms.a.predicate' defining a "
        "predicate to be negated."]
    assert errors["predicates.p.type"] == ['Missing required configuration "predicates.p.type" which has no default value.']


def test_a_converter_validates_its_own_keys_under_its_prefix():
    infos = validate(sink(**{"key.converter": "org.apache.kafka.connect.json.JsonConverter",
                             "key.converter.schemas.enable": "maybe"}))
    assert infos.errors() == {"key.converter.schemas.enable": [
        "Invalid value maybe for configuration schemas.enable: Expected value to be either true or false"]}
    names = [c["value"]["name"] for c in infos.to_json()["configs"] if c["value"]]
    assert "key.converter.schemas.enable" in names and "key.converter.converter.type" in names
    assert validate(sink(**{"value.converter": "com.example.Avro"})).errors() == {"value.converter": [
        "Invalid value com.example.Avro for configuration value.converter: Class com.example.Avro could not be found."]}


def test_worker_config_has_connects_defaults_and_lists_every_problem():
    config = WorkerConfig.parse({"group.id": "connect", "bootstrap.servers": "a:1, b:2"})
    assert (config.config_storage_topic, config.offset_storage_topic, config.status_storage_topic) == (
        "connect-configs", "connect-offsets", "connect-status")
    assert (config.offset_storage_partitions, config.status_storage_partitions, config.rest_port) == (25, 5, 8083)
    assert config.bootstrap_servers == "a:1,b:2" and not config.exactly_once_source_enabled
    with pytest.raises(ConfigError) as raised:
        WorkerConfig.parse({"rest.port": "99999", "offset.storage.partitions": "0",
                            "config.storage.replication.factor": "0"})
    assert set(raised.value.details["errors"]) == {"group.id", "rest.port", "offset.storage.partitions",
                                                   "config.storage.replication.factor"}
