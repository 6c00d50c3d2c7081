"""ConfigEntry and ConfigSource read as confluent-kafka's (``confluent_kafka/admin/_config.py``):
the same positional arguments, the same ``str``, and a source that is librdkafka's int."""
from __future__ import annotations

from broker.client.admin import (CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG, CONFIG_SOURCE_STATIC_BROKER_CONFIG,
                                 AlterConfigOpType, ConfigEntry, ConfigSource)


def test_positional_arguments_are_confluents():
    """confluent's order: name, value, source, is_read_only, is_default, is_sensitive, is_synonym,
    synonyms, incremental_operation."""
    e = ConfigEntry("log.retention.ms", "1", ConfigSource.STATIC_BROKER_CONFIG, True, False, True, True, {},
                    AlterConfigOpType.SET)
    assert (e.is_read_only, e.is_default, e.is_sensitive, e.is_synonym, e.synonyms, e.incremental_operation) == \
        (True, False, True, True, {}, AlterConfigOpType.SET)


def test_str_and_repr_are_confluents():
    e = ConfigEntry("retention.ms", "1000")
    assert str(e) == 'retention.ms="1000"' and repr(e) == 'ConfigEntry(retention.ms="1000")'


def test_a_source_given_or_compared_as_librdkafkas_int():
    e = ConfigEntry("log.retention.ms", "1", CONFIG_SOURCE_STATIC_BROKER_CONFIG)
    assert e.source is ConfigSource.STATIC_BROKER_CONFIG
    assert e.source == CONFIG_SOURCE_STATIC_BROKER_CONFIG and e.source != CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG
    assert e.source == "STATIC_BROKER_CONFIG" and ConfigSource(e.source) is e.source
    assert e.source != True   # noqa: E712 - a bool is not a source number


def test_config_resource_names_its_types_as_confluent():
    """confluent's ``ConfigResource.Type = ResourceType``: ``ConfigResource(ConfigResource.Type.TOPIC,
    name)``, the spelling of its examples and docs, must build a resource, not raise AttributeError."""
    from broker.client.admin import ConfigResource, ResourceType
    r = ConfigResource(ConfigResource.Type.BROKER, "1")
    assert r.restype is ResourceType.BROKER and r.restype_int == 4
    assert r == ConfigResource("broker", "1")
