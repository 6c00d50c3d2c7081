"""Config definitions as Kafka Connect's REST API shows them (``ConnectorPluginsResource``,
``AbstractHerder.connectorPluginConfig`` / ``validateConnectorConfig``): ``connector.class`` is
``ConnectorConfig``'s STRING key, shown as written, and a plugin's defaults are written as
``ConfigDef.convertToString`` writes them."""
from __future__ import annotations

import pytest

import connect.plugins  # noqa: F401  (registers the built-in plugins)
from connect.config import parse_connector_config, validate
from connect.plugins import plugin_config_keys

pytestmark = pytest.mark.unit

_SOURCE = {"name": "lines", "file": "/tmp/in.txt", "topic": "lines"}


def _connector_class(infos: dict) -> dict:
    (config,) = [c for c in infos["configs"] if c["definition"]["name"] == "connector.class"]
    return config


def test_connector_class_is_a_string_key_shown_as_written():
    # ConnectorConfig.configDef(): define(CONNECTOR_CLASS_CONFIG, Type.STRING, ...); the validate
    # response's value is the trimmed text, an alias as the user wrote it
    infos = validate({**_SOURCE, "connector.class": " FileStreamSource "}).to_json()
    config = _connector_class(infos)
    assert config["definition"]["type"] == "STRING"
    assert config["value"]["value"] == "FileStreamSource" and config["value"]["errors"] == []
    assert infos["error_count"] == 0
    # the worker still runs the class the alias names
    parsed = parse_connector_config({**_SOURCE, "connector.class": "FileStreamSource"})
    assert parsed.connector_class == "org.apache.kafka.connect.file.FileStreamSourceConnector"
    assert parsed.kind == "source"


@pytest.mark.parametrize("written", ["FileStreamSorce", ""])
def test_an_unknown_or_empty_connector_class_gets_plugins_new_connector_message(written):
    errors = validate({**_SOURCE, "connector.class": written}).errors()
    (message,) = errors["connector.class"]
    assert message.startswith("Failed to find any class that implements Connector and which name matches "
                              f"{written}, available connectors are: PluginDesc{{"), message


def test_a_transforms_defaults_are_written_as_convert_to_string_writes_them():
    # Cast's ConfigDef: spec LIST with no default (required), replace.null.with.default BOOLEAN true
    cast = {d["name"]: d for d in plugin_config_keys("org.apache.kafka.connect.transforms.Cast$Value")}
    assert (cast["spec"]["type"], cast["spec"]["required"], cast["spec"]["default_value"]) == ("LIST", True, None)
    rnwd = cast["replace.null.with.default"]
    assert (rnwd["type"], rnwd["required"], rnwd["default_value"]) == ("BOOLEAN", False, "true")
    # ReplaceField's exclude: a LIST defaulting to the empty list, written ""
    exclude = {d["name"]: d for d in plugin_config_keys("ReplaceField$Value")}["exclude"]
    assert (exclude["required"], exclude["default_value"]) == (False, "")
    # every definition has ConfigKeyInfo's fields
    assert set(rnwd) == {"name", "type", "required", "default_value", "importance", "documentation", "group",
                         "width", "display_name", "dependents", "order"}


def test_connector_plugins_are_listed_sinks_first_then_sources_then_the_other_plugins():
    # ConnectorPluginsResource: sinkConnectors(), sourceConnectors(), transformations(),
    # predicates(), converters(), headerConverters(), each sorted by class name
    from connect.plugins import plugin_list
    connectors = plugin_list()
    kinds = [p["type"] for p in connectors]
    assert kinds == sorted(kinds, key=["sink", "source"].index) and {"sink", "source"} == set(kinds)
    for kind in ("sink", "source"):
        names = [p["class"] for p in connectors if p["type"] == kind]
        assert names == sorted(names) and names
    everything = [p["type"] for p in plugin_list(connectors_only=False)]
    order = ["sink", "source", "transformation", "predicate", "converter", "header_converter"]
    assert everything == sorted(everything, key=order.index) and set(everything) == set(order)
