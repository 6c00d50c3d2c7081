"""DescribeConfigs of a broker shows the retention and roll time the broker uses: under
``log.retention.hours=24`` its ``log.retention.ms`` is not the 7-day built-in default, which
Riverlog's topics do not get (``KafkaConfig.logRetentionTimeMillis``: ms, else minutes, else
hours)."""
from __future__ import annotations

import pytest

from broker.config import BROKER_CONFIG, topic_defaults
from broker.server.config_handlers import broker_entry

STATIC, DEFAULT = "STATIC_BROKER_CONFIG", "DEFAULT_CONFIG"


def test_an_unset_finer_key_shows_the_coarser_keys_value_in_its_own_unit():
    config = BROKER_CONFIG.parse({"log.retention.hours": "24", "log.roll.hours": "1"})
    assert broker_entry(config, "log.retention.ms") == (
        "86400000", [("log.retention.hours", "24", STATIC), ("log.retention.hours", "168", DEFAULT)])
    assert broker_entry(config, "log.retention.minutes")[0] == "1440"
    assert broker_entry(config, "log.retention.hours") == (
        "24", [("log.retention.hours", "24", STATIC), ("log.retention.hours", "168", DEFAULT)])
    assert broker_entry(config, "log.roll.ms")[0] == "3600000"
    assert int(broker_entry(config, "log.retention.ms")[0]) == topic_defaults(config)["retention.ms"]


def test_the_most_specific_key_set_decides():
    config = BROKER_CONFIG.parse({"log.retention.minutes": "90", "log.retention.hours": "24"})
    value, synonyms = broker_entry(config, "log.retention.ms")
    assert value == "5400000" and [s[0] for s in synonyms] == [
        "log.retention.minutes", "log.retention.hours", "log.retention.hours"]
    assert broker_entry(config, "log.retention.minutes") == (
        "90", [("log.retention.minutes", "90", STATIC), ("log.retention.minutes", "10080", DEFAULT)])


def test_a_negative_coarser_value_keeps_forever():
    config = BROKER_CONFIG.parse({"log.retention.hours": "-1"})
    assert broker_entry(config, "log.retention.ms")[0] == "-1"
    assert broker_entry(config, "log.retention.minutes")[0] == "-1"


@pytest.mark.parametrize("name", ["log.retention.ms", "log.roll.ms", "num.partitions"])
def test_keys_nothing_overrides_show_their_default(name):
    """guard: the answer for a broker started without settings is unchanged."""
    config = BROKER_CONFIG.parse({})
    default = str(BROKER_CONFIG.keys[name].default)
    assert broker_entry(config, name) == (default, [(name, default, DEFAULT)])
