"""The deprecated ``message.timestamp.difference.max.ms`` works as in Kafka 3.6 to 4.0 (KIP-937):
accepted on a topic and as the broker's ``log.message.timestamp.difference.max.ms``, and the bound
of ``message.timestamp.before.max.ms`` / ``after.max.ms`` wherever one is left at its default
(``LogConfig.getMessageTimestampBeforeMaxMs``/``AfterMaxMs``)."""
from __future__ import annotations

import pytest

from broker.clock import ManualClock
from broker.config import BROKER_CONFIG, LONG_MAX, TOPIC_CONFIG, topic_defaults
from broker.errors import InvalidConfigError, InvalidTimestampError
from broker.partition import AppendNotifier, Partition
from broker.records import arrow_body
from tests.unit._logkit import open_log

NOW = 10_000_000
DIFFERENCE = "message.timestamp.difference.max.ms"


def _leader(tmp_path, config: dict) -> Partition:
    clock = ManualClock(NOW)
    partition = Partition("t", 0, "id", open_log(tmp_path, config, clock), AppendNotifier(), clock=clock)
    partition.make_leader(0, 0, [0], [0])
    return partition


def _batch(*timestamps: int) -> bytes:
    n = len(timestamps)
    return arrow_body.encode_batch(arrow_body.record_batch([b"k"] * n, [b"v"] * n, list(timestamps)))


def test_a_topic_and_a_broker_accept_it_with_kafkas_bounds():
    """A topic created with Kafka 3.x tooling (Connect's topic.creation, Terraform, Strimzi) still sets
    it; a server.properties of that era sets the broker key."""
    assert TOPIC_CONFIG.parse({DIFFERENCE: "60000"})[DIFFERENCE] == 60_000
    assert TOPIC_CONFIG.parse({})[DIFFERENCE] == LONG_MAX
    with pytest.raises(InvalidConfigError, match="must be at least 0"):
        TOPIC_CONFIG.parse({DIFFERENCE: "-1"})
    broker = BROKER_CONFIG.parse({"log.message.timestamp.difference.max.ms": "3600000"})
    assert TOPIC_CONFIG.parse({}, defaults=topic_defaults(broker))[DIFFERENCE] == 3_600_000


def test_it_bounds_both_sides_when_before_and_after_are_unset(tmp_path):
    partition = _leader(tmp_path, {DIFFERENCE: 60_000})
    with pytest.raises(InvalidTimestampError) as old:
        partition.append_records(_batch(NOW - 60_001))
    assert str(old.value).endswith(f"Timestamp {NOW - 60_001} of message with offset 0 is out of range. The "
                                   f"timestamp should be within [{NOW - 60_000}, {NOW + 60_000}] "
                                   f"({DIFFERENCE}=60000)")
    with pytest.raises(InvalidTimestampError, match=rf"Timestamp {NOW + 60_001} of message with offset 1 "):
        partition.append_records(_batch(NOW, NOW + 60_001))
    assert partition.log.log_end_offset == 0
    assert partition.append_records(_batch(NOW - 60_000, NOW + 60_000)).last_offset == 1


def test_a_bound_that_is_set_wins_over_it(tmp_path):
    """Only a bound left at Long.MAX_VALUE takes the difference: before.max.ms=1000 refuses what the
    difference of a minute would let through, while the future side still follows the difference."""
    partition = _leader(tmp_path, {DIFFERENCE: 60_000, "message.timestamp.before.max.ms": 1000})
    with pytest.raises(InvalidTimestampError, match=rf"within \[{NOW - 1000}, {NOW + 60_000}\] "
                                                    rf"\(message.timestamp.before.max.ms=1000, {DIFFERENCE}=60000\)"):
        partition.append_records(_batch(NOW - 1001))
    assert partition.append_records(_batch(NOW - 1000, NOW + 60_000)).last_offset == 1


def test_an_altered_difference_applies_to_the_live_partition(tmp_path):
    """AlterConfigs reaches a hosted partition as a new config (``Partition.set_config``)."""
    partition = _leader(tmp_path, {})
    assert partition.append_records(_batch(1)).last_offset == 0
    partition.set_config(TOPIC_CONFIG.parse({DIFFERENCE: 1000}))
    with pytest.raises(InvalidTimestampError, match=rf"\({DIFFERENCE}=1000\)"):
        partition.append_records(_batch(1))
    partition.set_config(TOPIC_CONFIG.parse({DIFFERENCE: 1000, "message.timestamp.type": "LogAppendTime"}))
    assert partition.append_records(_batch(1)).first_offset == 1


def test_the_range_in_the_message_stays_within_a_long(tmp_path):
    """With only the past bounded, the future end is Long.MAX_VALUE, not now + Long.MAX_VALUE (a
    number no long holds)."""
    partition = _leader(tmp_path, {"message.timestamp.before.max.ms": 60_000})
    with pytest.raises(InvalidTimestampError) as raised:
        partition.append_records(_batch(1))
    assert f"within [{NOW - 60_000}, {LONG_MAX}] (message.timestamp.before.max.ms=60000, " \
           f"message.timestamp.after.max.ms={LONG_MAX})" in str(raised.value)
