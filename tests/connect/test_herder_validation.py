"""``POST``/``PUT``/``PATCH`` refusals as Kafka's ``AbstractHerder`` words them
(``maybeAddConfigErrors``, ``Plugins.newConnector``), checked on the pure config check the worker
runs before it writes anything (``connect.plugins.check_connector_config``)."""
from __future__ import annotations

import pytest

import connect.plugins  # noqa: F401  (registers the built-in plugins)
from connect.config import validate
from connect.errors import ConfigError
from connect.plugins import check_connector_config

pytestmark = pytest.mark.unit

_VALIDATE_HINT = "\nYou can also find the above list of errors at the endpoint `/connector-plugins/{connectorType}/config/validate`"


def _refusal(config: dict) -> ConfigError:
    with pytest.raises(ConfigError) as raised:
        check_connector_config("c", config)
    return raised.value


def test_a_refused_config_ends_with_kafkas_pointer_to_the_validate_endpoint():
    # AbstractHerder.maybeAddConfigErrors (since KAFKA-4878): the count, each message, then the hint
    e = _refusal({"connector.class": "FileStreamSource", "tasks.max": "0"})
    assert str(e) == ("Connector configuration is invalid and contains the following 3 error(s):\n"
                      "Invalid value 0 for configuration tasks.max: Value must be at least 1\n"
                      'Missing required configuration "file" which has no default value.\n'
                      'Missing required configuration "topic" which has no default value.' + _VALIDATE_HINT)
    assert set(e.details["errors"]) == {"tasks.max", "file", "topic"}


def test_an_unknown_connector_class_names_the_connectors_there_are():
    # Plugins.newConnector: "Failed to find any class that implements Connector and which name
    # matches <x>, available connectors are: PluginDesc{...}, ..."
    e = _refusal({"connector.class": "FileStreamSorce", "file": "/tmp/x", "topic": "t"})
    (message,) = e.details["errors"]["connector.class"]
    assert message.startswith("Failed to find any class that implements Connector and which name matches "
                              "FileStreamSorce, available connectors are: PluginDesc{"), message
    assert ("PluginDesc{klass=class org.apache.kafka.connect.file.FileStreamSourceConnector, "
            "name='org.apache.kafka.connect.file.FileStreamSourceConnector'") in message, message
    assert "type=source, typeName='source', location='classpath'}" in message, message
    assert "FileStreamSinkConnector" in message and "type=sink" in message, message
    assert str(e).endswith(_VALIDATE_HINT)


def test_the_validate_response_lists_an_unknown_connector_class_with_the_connectors_there_are():
    errors = validate({"name": "x", "connector.class": "Nope", "tasks.max": "x"}).errors()
    assert errors["connector.class"][0].startswith(
        "Failed to find any class that implements Connector and which name matches Nope, available connectors "
        "are: PluginDesc{"), errors
    assert errors["tasks.max"] == ["Invalid value x for configuration tasks.max: Not a number of type INT"]


def test_a_known_connector_class_by_alias_is_accepted():
    props = check_connector_config("c", {"connector.class": "FileStreamSource", "file": "/tmp/x", "topic": "t"})
    assert props["connector.class"] == "FileStreamSource" and props["name"] == "c"


def test_a_sinks_consumer_group_override_is_refused_at_create_not_at_start():
    # Kafka runs the sink's consumer in consumer.override.group.id; here a sink's group is always
    # connect-<name> (its offsets, the offsets API, the DLQ transaction), and the query could not
    # start with both: refused with the config's other problems instead of failing later
    sink = {"connector.class": "FileStreamSink", "topics": "t", "file": "/tmp/x",
            "consumer.override.group.id": "my-group"}
    e = _refusal(sink)
    assert e.details["errors"] == {"consumer.override.group.id": [
        "Invalid value my-group for configuration group.id: a sink connector's consumer "
        "group is connect-<connector name>; it cannot be overridden"]}
    # the group a sink would use anyway, and other consumer settings, stay accepted
    assert check_connector_config("c", {**sink, "consumer.override.group.id": "connect-c"})
    assert check_connector_config("c", {**{k: v for k, v in sink.items() if k != "consumer.override.group.id"},
                                        "consumer.override.fetch.max.bytes": "1048576"})


@pytest.mark.parametrize("connector", [
    {"connector.class": "FileStreamSink", "topics": "t", "file": "/tmp/x"},
    {"connector.class": "TopicCopy", "topics": "t"}])
def test_consumer_settings_the_reader_decides_are_refused_at_create_not_at_start(connector):
    # the topic reader decides where a connector starts (its committed offsets, else the earliest)
    # and commits each batch itself; its query refused these, so the connector failed at its start
    e = _refusal({**connector, "consumer.override.auto.offset.reset": "latest",
                  "consumer.override.enable.auto.commit": "true"})
    errors = e.details["errors"]
    assert set(errors) == {"consumer.override.auto.offset.reset", "consumer.override.enable.auto.commit"}, errors
    assert errors["consumer.override.auto.offset.reset"] == [
        "Invalid value latest for configuration auto.offset.reset: a connector reading topics starts at its "
        "committed offsets, else at the earliest; it cannot be overridden"]


def test_the_values_that_say_what_the_reader_does_are_accepted_and_not_passed_on():
    # Kafka's Connect consumers default to earliest and no auto commit; a worker.properties or a
    # connector saying so again is accepted, and the reader is not handed options it refuses
    from connect.config import parse_connector_config
    config = {"name": "c", "connector.class": "FileStreamSink", "topics": "t", "file": "/tmp/x",
              "consumer.override.auto.offset.reset": "earliest", "consumer.override.enable.auto.commit": "false",
              "consumer.override.group.id": "connect-c", "consumer.override.fetch.max.bytes": "1048576"}
    assert check_connector_config("c", config)
    assert parse_connector_config(config).reader_options() == {"riverlog.fetch.max.bytes": "1048576"}


@pytest.mark.parametrize("connector, key", [
    ({"connector.class": "FileStreamSource", "file": "/tmp/x", "topic": "t"}, "producer.override.bootstrap.servers"),
    ({"connector.class": "FileStreamSink", "topics": "t", "file": "/tmp/x"}, "consumer.override.bootstrap.servers"),
    ({"connector.class": "TopicCopy", "topics": "t"}, "consumer.override.bootstrap.servers"),
    ({"connector.class": "TopicCopy", "topics": "t"}, "producer.override.bootstrap.servers")])
def test_another_cluster_through_a_client_override_is_refused(connector, key):
    # a source's records and its connect-offsets records share one transaction, and a sink's group
    # offsets are committed where its reader's cluster is assumed to be: a client override naming
    # another cluster would put the offsets where the worker never reads them
    e = _refusal({**connector, key: "elsewhere:9092"})
    (message,) = e.details["errors"][key]
    assert message.startswith("Invalid value elsewhere:9092 for configuration bootstrap.servers: "), message
    assert "target.cluster.bootstrap.servers" in message or "source.cluster.bootstrap.servers" in message, message
