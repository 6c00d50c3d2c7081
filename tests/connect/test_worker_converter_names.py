"""The worker's ``key.converter`` and ``value.converter`` name converters, as Kafka's ``CLASS``
keys do: a name no converter has stops the worker at start with Kafka's message, instead of
failing each connector that uses the default when its query starts."""
from __future__ import annotations

import pytest

from connect.errors import ConfigError
from connect.worker_config import WorkerConfig

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("key", ["key.converter", "value.converter"])
def test_an_unknown_default_converter_is_refused_at_start(key):
    with pytest.raises(ConfigError) as e:
        WorkerConfig.parse({"group.id": "g", key: "JsonConvertr"})
    assert f"Invalid value JsonConvertr for configuration {key}: Class JsonConvertr could not be found." in str(e.value)


@pytest.mark.parametrize("name", ["JsonConverter", "StringConverter", "ByteArrayConverter",
                                  "org.apache.kafka.connect.storage.StringConverter",
                                  " org.apache.kafka.connect.json.JsonConverter "])
def test_known_converters_by_alias_or_class_name_are_accepted(name):
    config = WorkerConfig.parse({"group.id": "g", "key.converter": name, "value.converter": name})
    assert (config.key_converter, config.value_converter) == (name.strip(), name.strip())
