"""A connector's ``consumer.override.max.poll.records`` (and the worker's ``consumer.max.poll.records``)
is Connect's batch bound, refused at ``POST`` with Kafka's ``ConfigDef`` messages for an INT of at
least 1; the other consumer settings still reach the reader."""
from __future__ import annotations

import pytest

import connect.plugins  # noqa: F401  (registers the built-in plugins)
from connect.config import WorkerConfig, parse_connector_config, validate
from connect.errors import ConfigError

pytestmark = pytest.mark.unit

SINK = {"name": "s", "connector.class": "FileStreamSink", "topics": "t", "file": "/tmp/out"}
WORKER = {"bootstrap.servers": "127.0.0.1:9092", "group.id": "connect"}


def test_a_good_consumer_override_still_reaches_the_reader():
    config = parse_connector_config({**SINK, "consumer.override.fetch.max.bytes": "1048576",
                                     "consumer.override.max.poll.records": "10"})
    assert config.reader_options() == {"riverlog.fetch.max.bytes": "1048576", "maxOffsetsPerTrigger": "10"}


def test_max_poll_records_gets_kafkas_config_def_messages():
    for bad, why in (("many", "Not a number of type INT"), ("2147483648", "Not a number of type INT"),
                     ("0", "Value must be at least 1")):
        assert validate({**SINK, "consumer.override.max.poll.records": bad}).errors() == {
            "consumer.override.max.poll.records": [f"Invalid value {bad} for configuration max.poll.records: {why}"]}


def test_the_workers_max_poll_records_gets_the_same_message():
    with pytest.raises(ConfigError) as raised:
        WorkerConfig.parse({**WORKER, "consumer.max.poll.records": "many"})
    assert raised.value.details["errors"] == {"consumer.max.poll.records": [
        "Invalid value many for configuration max.poll.records: Not a number of type INT"]}
