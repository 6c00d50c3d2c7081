"""The worker's ``producer.*`` and ``consumer.*`` settings, Kafka's defaults for every connector's
clients (``Worker.baseProducerConfigs`` / ``baseConsumerConfigs``: the worker's prefixed
settings, then the connector's ``*.override.*`` over them)."""
from __future__ import annotations

import pytest

import connect.plugins  # noqa: F401  (registers the built-in plugins)
from connect.config import WorkerConfig, parse_connector_config, with_worker_client_defaults
from connect.errors import ConfigError

pytestmark = pytest.mark.unit

WORKER = {"bootstrap.servers": "127.0.0.1:9092", "group.id": "connect"}
SINK = {"name": "s", "connector.class": "FileStreamSink", "topics": "t", "file": "/tmp/out"}


def test_the_workers_prefixed_client_settings_reach_every_connector_and_its_overrides_win():
    worker = WorkerConfig.parse({**WORKER, "consumer.max.poll.records": "100", "consumer.fetch.max.bytes": "1048576",
                                 "producer.linger.ms": "5", "producer.compression.type": "lz4"})
    plain = with_worker_client_defaults(parse_connector_config(SINK), worker)
    assert plain.reader_options() == {"maxOffsetsPerTrigger": "100", "riverlog.fetch.max.bytes": "1048576"}
    assert dict(plain.producer_overrides) == {"linger.ms": "5", "compression.type": "lz4"}
    own = with_worker_client_defaults(parse_connector_config(
        {**SINK, "consumer.override.max.poll.records": "7", "producer.override.linger.ms": "0"}), worker)
    assert own.reader_options() == {"maxOffsetsPerTrigger": "7", "riverlog.fetch.max.bytes": "1048576"}
    assert dict(own.producer_overrides) == {"linger.ms": "0", "compression.type": "lz4"}


def test_a_worker_without_prefixed_settings_leaves_the_connector_as_it_is():
    config = parse_connector_config({**SINK, "consumer.override.max.poll.records": "7"})
    assert with_worker_client_defaults(config, WorkerConfig.parse(WORKER)).reader_options() == \
        {"maxOffsetsPerTrigger": "7"}


def test_bad_prefixed_settings_refuse_the_worker_config_naming_each():
    with pytest.raises(ConfigError) as raised:
        WorkerConfig.parse({**WORKER, "producer.linger.ms": "soon", "consumer.max.poll.records": "0",
                            "consumer.group.id": "all-sinks"})
    errors = raised.value.details["errors"]
    assert set(errors) == {"producer.linger.ms", "consumer.max.poll.records", "consumer.group.id"}, errors
    assert "linger.ms" in errors["producer.linger.ms"][0]
    assert errors["consumer.max.poll.records"] == [
        "Invalid value 0 for configuration max.poll.records: Value must be at least 1"]
    assert "connect-<connector name>" in errors["consumer.group.id"][0]


def test_consumer_settings_the_sink_decides_itself_refuse_the_worker():
    # a sink decides where it starts and when it commits (its reader refuses both): refused when
    # the worker starts, not when each sink does
    with pytest.raises(ConfigError) as raised:
        WorkerConfig.parse({**WORKER, "consumer.auto.offset.reset": "latest", "consumer.enable.auto.commit": "true",
                            "consumer.fetch.max.bytes": "1048576"})
    errors = raised.value.details["errors"]
    assert set(errors) == {"consumer.auto.offset.reset", "consumer.enable.auto.commit"}, errors
    assert "committed offsets" in errors["consumer.auto.offset.reset"][0]
