"""Every converter has Kafka's config definition (``Converter.config()``), listed by
``GET /connector-plugins/{plugin}/config`` and validated under ``<prop>.`` by ``validate``, as
Kafka's ``validateConverterConfig`` does: StringConverter's ``converter.type`` and
``converter.encoding``, ByteArrayConverter's ``converter.type``, SimpleHeaderConverter's none."""
from __future__ import annotations

import pytest

from connect.plugins import plugin_config_keys, validate_connector_config

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("plugin, expected", [
    ("StringConverter", [("converter.type", None), ("converter.encoding", "UTF-8")]),
    ("org.apache.kafka.connect.storage.StringConverter", [("converter.type", None), ("converter.encoding", "UTF-8")]),
    ("ByteArrayConverter", [("converter.type", None)]),
    ("org.apache.kafka.connect.converters.ByteArrayConverter", [("converter.type", None)]),
    ("SimpleHeaderConverter", []),
])
def test_converter_plugin_config_keys_are_kafkas(plugin, expected):
    assert [(k["name"], k["default_value"]) for k in plugin_config_keys(plugin)] == expected


def test_validate_lists_a_string_converters_own_keys_under_its_prefix():
    infos = validate_connector_config({"name": "x", "connector.class": "FileStreamSource", "file": "/tmp/in.txt",
                                       "topic": "t", "value.converter": "StringConverter",
                                       "value.converter.converter.encoding": "UTF-16",
                                       "header.converter": "ByteArrayConverter"}).to_json()
    values = {c["value"]["name"]: c["value"]["value"] for c in infos["configs"]}
    assert values["value.converter.converter.encoding"] == "UTF-16"
    assert values["value.converter.converter.type"] == "value"
    assert values["header.converter.converter.type"] == "header"
    assert infos["error_count"] == 0
