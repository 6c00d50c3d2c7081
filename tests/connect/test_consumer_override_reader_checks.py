"""A connector's ``consumer.override.*`` and the worker's ``consumer.*`` are checked as its
``producer.override.*`` are: a value or key the topic reader's consumer would refuse when the
query starts is refused at ``POST`` (and when the worker starts), with the client's message."""
from __future__ import annotations

import pytest

import connect.plugins  # noqa: F401  (registers the built-in plugins)
from connect.config import WorkerConfig, validate
from connect.errors import ConfigError

pytestmark = pytest.mark.unit

SINK = {"name": "s", "connector.class": "FileStreamSink", "topics": "t", "file": "/tmp/out"}
WORKER = {"bootstrap.servers": "127.0.0.1:9092", "group.id": "connect"}


def test_a_consumer_override_the_reader_would_refuse_is_refused_at_post():
    errors = validate({**SINK, "consumer.override.fetch.max.bytes": "lots",
                       "consumer.override.no.such.setting": "1"}).errors()
    assert set(errors) == {"consumer.override.fetch.max.bytes", "consumer.override.no.such.setting"}, errors
    assert "fetch.max.bytes" in errors["consumer.override.fetch.max.bytes"][0]
    assert "no.such.setting" in errors["consumer.override.no.such.setting"][0]


def test_the_workers_consumer_settings_are_checked_the_same_way():
    with pytest.raises(ConfigError) as raised:
        WorkerConfig.parse({**WORKER, "consumer.fetch.max.bytes": "lots", "consumer.fetch.min.bytes": "1"})
    assert set(raised.value.details["errors"]) == {"consumer.fetch.max.bytes"}
