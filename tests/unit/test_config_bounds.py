"""Numeric configs stay within their Kafka type's range: refused once, at parse, naming key and range."""
from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.client.config import ADMIN_CONFIG, CONSUMER_CONFIG, PRODUCER_CONFIG
from broker.config import BROKER_CONFIG, INT_MAX, LONG_MAX, SHORT_MAX, TOPIC_CONFIG
from broker.errors import InvalidConfigError

pytestmark = pytest.mark.unit

DEFINITIONS = [TOPIC_CONFIG, BROKER_CONFIG, PRODUCER_CONFIG, CONSUMER_CONFIG, ADMIN_CONFIG]
NUMERIC = [(d, k) for d in DEFINITIONS for k in d.describe() if k.type in (int, float)]


def refused(definition, name, raw) -> str:
    with pytest.raises(InvalidConfigError) as info:
        definition.parse({name: raw})
    assert info.value.details == {"config": name}
    assert f"'{name}'" in info.value.message
    return info.value.message


# Kafka declares these INT: a size or count past int32 cannot be honoured (batch lengths and wire
# fields are int32), so 9e18 must not be accepted.
@pytest.mark.parametrize("definition, name", [
    (TOPIC_CONFIG, "max.message.bytes"), (TOPIC_CONFIG, "segment.bytes"), (TOPIC_CONFIG, "index.interval.bytes"),
    (TOPIC_CONFIG, "min.insync.replicas"), (BROKER_CONFIG, "message.max.bytes"),
    (BROKER_CONFIG, "socket.request.max.bytes"), (BROKER_CONFIG, "replica.fetch.max.bytes"),
    (BROKER_CONFIG, "num.partitions"), (BROKER_CONFIG, "transaction.max.timeout.ms"),
    (PRODUCER_CONFIG, "batch.size"), (PRODUCER_CONFIG, "max.request.size"), (PRODUCER_CONFIG, "retries"),
    (PRODUCER_CONFIG, "delivery.timeout.ms"), (CONSUMER_CONFIG, "fetch.max.bytes"),
    (CONSUMER_CONFIG, "max.partition.fetch.bytes"), (CONSUMER_CONFIG, "session.timeout.ms"),
])
@pytest.mark.parametrize("raw", [9e18, "9000000000000000000", INT_MAX + 1, 2**64])
def test_int32_keys_refuse_values_past_int32(definition, name, raw):
    message = refused(definition, name, raw)
    assert str(INT_MAX) in message, message
    assert definition.parse({name: INT_MAX})[name] == INT_MAX


@pytest.mark.parametrize("name", ["offsets.topic.replication.factor", "transaction.state.log.replication.factor"])
def test_replication_factors_are_int16_as_in_kafka(name):
    assert str(SHORT_MAX) in refused(BROKER_CONFIG, name, SHORT_MAX + 1)
    assert BROKER_CONFIG.parse({name: SHORT_MAX})[name] == SHORT_MAX


@pytest.mark.parametrize("definition, name", [
    (TOPIC_CONFIG, "retention.ms"), (TOPIC_CONFIG, "retention.bytes"), (TOPIC_CONFIG, "segment.ms"),
    (TOPIC_CONFIG, "flush.messages"), (TOPIC_CONFIG, "max.compaction.lag.ms"), (BROKER_CONFIG, "log.retention.ms"),
    (PRODUCER_CONFIG, "buffer.memory"), (PRODUCER_CONFIG, "max.block.ms"), (CONSUMER_CONFIG, "retry.backoff.ms"),
])
def test_long_keys_take_int64_and_nothing_past_it(definition, name):
    assert definition.parse({name: LONG_MAX})[name] == LONG_MAX
    assert definition.parse({name: str(LONG_MAX)})[name] == LONG_MAX
    message = refused(definition, name, LONG_MAX + 1)
    assert "64-bit" in message and str(LONG_MAX) in message


@pytest.mark.parametrize("definition, name, low", [
    (TOPIC_CONFIG, "retention.ms", -1), (TOPIC_CONFIG, "segment.ms", 1), (TOPIC_CONFIG, "flush.messages", 1),
    (TOPIC_CONFIG, "max.message.bytes", 0), (TOPIC_CONFIG, "min.insync.replicas", 1),
    (BROKER_CONFIG, "num.partitions", 1), (CONSUMER_CONFIG, "fetch.min.bytes", 0),
    (CONSUMER_CONFIG, "queued.max.messages.kbytes", 1), (PRODUCER_CONFIG, "retries", 0),
])
def test_counts_and_sizes_keep_kafkas_lower_bounds(definition, name, low):
    assert definition.parse({name: low})[name] == low
    message = refused(definition, name, low - 1)
    assert str(low) in message


@pytest.mark.parametrize("raw", ["nan", "inf", float("-inf")])
@pytest.mark.parametrize("definition, name", [(TOPIC_CONFIG, "min.cleanable.dirty.ratio"),
                                              (PRODUCER_CONFIG, "linger.ms")])
def test_floats_must_be_finite(definition, name, raw):
    refused(definition, name, raw)


def test_every_numeric_key_has_a_range_in_its_message():
    """No numeric key is unbounded above: a huge value names the key and the allowed range."""
    for definition, key in NUMERIC:
        message = refused(definition, key.name, 10**30)
        assert re.search(r"between -?[\d.]+ and [\d.]+|at most \d+", message), message


@settings(max_examples=200, deadline=None, database=None)
@given(st.sampled_from(NUMERIC), st.integers(-2**70, 2**70))
def test_a_value_is_either_refused_by_name_or_kept_within_int64(pair, value):
    definition, key = pair
    try:
        parsed = definition.parse({key.name: value})[key.name]
    except InvalidConfigError as e:
        assert e.details == {"config": key.name}
        return
    assert -2**63 <= parsed <= LONG_MAX
    assert parsed == value
