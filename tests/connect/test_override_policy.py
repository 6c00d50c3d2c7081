"""The worker's ``connector.client.config.override.policy`` (KIP-458), as Kafka applies it to a
connector's ``producer.override.*`` / ``consumer.override.*`` when its config is created or
validated: ``All`` (the default) takes any, ``None`` none, ``Principal`` only the SASL and
``security.protocol`` keys; each refused key carries Kafka's message."""
from __future__ import annotations

import pytest

import connect.plugins  # noqa: F401  (registers the built-in plugins)
from connect.errors import ConfigError
from connect.plugins import check_connector_config
from connect.worker_config import WorkerConfig

pytestmark = pytest.mark.unit

WORKER = {"bootstrap.servers": "127.0.0.1:9092", "group.id": "connect"}
SINK = {"connector.class": "FileStreamSink", "topics": "t", "file": "/tmp/o",
        "errors.deadletterqueue.topic.name": "dlq", "consumer.override.fetch.max.bytes": "1048576",
        "producer.override.linger.ms": "5"}


def _policy(value: str | None) -> str:
    return WorkerConfig.parse({**WORKER, **({} if value is None else
                                            {"connector.client.config.override.policy": value})}).override_policy


def test_the_policy_is_kafkas_all_by_default_and_takes_its_plugin_names():
    assert _policy(None) == "All"
    assert _policy("None") == "None"
    assert _policy("org.apache.kafka.connect.connector.policy.PrincipalConnectorClientConfigOverridePolicy") \
        == "Principal"
    assert _policy("NoneConnectorClientConfigOverridePolicy") == "None"
    with pytest.raises(ConfigError) as refused:
        _policy("Everything")
    assert list(refused.value.details["errors"]) == ["connector.client.config.override.policy"]


def test_the_none_policy_refuses_every_override_with_kafkas_message():
    with pytest.raises(ConfigError) as refused:
        check_connector_config("s", SINK, override_policy="None")
    errors = refused.value.details["errors"]
    assert errors == {
        "consumer.override.fetch.max.bytes": ["The 'None' policy does not allow 'fetch.max.bytes' to be overridden "
                                              "in the connector configuration."],
        "producer.override.linger.ms": ["The 'None' policy does not allow 'linger.ms' to be overridden in the "
                                        "connector configuration."]}
    from connect.plugins import validate_connector_config
    assert validate_connector_config({"name": "s", **SINK}, override_policy="None").error_count == 2


def test_the_all_policy_takes_them_and_principal_takes_only_the_security_keys():
    assert check_connector_config("s", SINK)["producer.override.linger.ms"] == "5"
    with pytest.raises(ConfigError) as refused:
        check_connector_config("s", SINK, override_policy="Principal")
    assert set(refused.value.details["errors"]) == {"consumer.override.fetch.max.bytes",
                                                    "producer.override.linger.ms"}
    assert "'Principal' policy" in refused.value.details["errors"]["producer.override.linger.ms"][0]
