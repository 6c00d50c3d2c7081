"""Typed configuration: parsing strings and values, broker-supplied topic defaults, errors naming the key."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.config import (BROKER_CONFIG, INT_MAX, LONG_MAX, TOPIC_CONFIG, TOPIC_KEYS, read_properties,
                           topic_defaults)
from broker.errors import InvalidConfigError

pytestmark = pytest.mark.unit


def invalid(definition, values: dict, **kwargs) -> InvalidConfigError:
    with pytest.raises(InvalidConfigError) as info:
        definition.parse(values, **kwargs)
    return info.value


# ------------------------------------------------------------------------------------ parsing
@pytest.mark.parametrize("raw, expected", [("2048", 2048), (" 2048 ", 2048), (2048, 2048), (2048.0, 2048)])
def test_int_from_strings_and_values(raw, expected):
    cfg = TOPIC_CONFIG.parse({"segment.bytes": raw})
    assert cfg["segment.bytes"] == expected and type(cfg["segment.bytes"]) is int


@pytest.mark.parametrize("raw, expected", [("true", True), ("TRUE", True), ("1", True), ("yes", True),
                                           (True, True), ("false", False), ("0", False), ("no", False),
                                           (False, False), (" False ", False)])
def test_bool_from_strings_and_values(raw, expected):
    assert TOPIC_CONFIG.parse({"unclean.leader.election.enable": raw})["unclean.leader.election.enable"] is expected


@pytest.mark.parametrize("raw, expected", [("0.25", 0.25), (1, 1.0), (0, 0.0), ("1.0", 1.0)])
def test_float_from_strings_and_values(raw, expected):
    assert TOPIC_CONFIG.parse({"min.cleanable.dirty.ratio": raw})["min.cleanable.dirty.ratio"] == expected


@pytest.mark.parametrize("raw", ["compact", "delete", "compact,delete", "delete, compact", "", " "])
def test_cleanup_policy_accepts_kafka_values(raw):
    """Kafka 4.2's topic configs: "An empty list means infinite retention"."""
    assert TOPIC_CONFIG.parse({"cleanup.policy": raw})["cleanup.policy"] == raw.strip()


@pytest.mark.parametrize("raw", ["deleted", "compact,", ",delete", "compact,,delete", "none"])
def test_cleanup_policy_refuses_anything_else(raw):
    from broker.errors import InvalidConfigError
    with pytest.raises(InvalidConfigError, match="infinite retention"):
        TOPIC_CONFIG.parse({"cleanup.policy": raw})


@settings(max_examples=50, deadline=None, database=None)
@given(value=st.integers(100, INT_MAX), as_string=st.booleans())
def test_segment_bytes_in_range_round_trips(value, as_string):
    cfg = TOPIC_CONFIG.parse({"segment.bytes": str(value) if as_string else value})
    assert cfg["segment.bytes"] == value
    assert cfg.overrides == {"segment.bytes": value}


def test_defaults_when_nothing_is_set():
    cfg = TOPIC_CONFIG.parse({})
    assert cfg["segment.bytes"] == 1_073_741_824
    assert cfg["message.timestamp.type"] == "CreateTime"
    assert cfg["flush.messages"] == LONG_MAX
    assert cfg["unclean.leader.election.enable"] is False
    assert dict(cfg.overrides) == {}
    assert set(cfg) == {k.name for k in TOPIC_KEYS}
    assert len(cfg) == len(TOPIC_KEYS)


def test_none_means_not_set():
    cfg = TOPIC_CONFIG.parse({"segment.bytes": None})
    assert cfg["segment.bytes"] == 1_073_741_824
    assert "segment.bytes" not in cfg.overrides


def test_overrides_remember_only_what_was_set():
    cfg = TOPIC_CONFIG.parse({"retention.ms": "-1"}, defaults={"segment.bytes": 4096})
    assert dict(cfg.overrides) == {"retention.ms": -1}
    assert cfg["segment.bytes"] == 4096


def test_config_is_immutable():
    cfg = TOPIC_CONFIG.parse({})
    with pytest.raises(TypeError):
        cfg["segment.bytes"] = 1  # type: ignore[index]


def test_ignored_keys_are_not_unknown():
    cfg = TOPIC_CONFIG.parse({"segment.bytes": 500, "something.else": "x"}, ignore=["something.else"])
    assert cfg["segment.bytes"] == 500
    assert "something.else" not in cfg


def test_with_overrides_parses_again():
    cfg = TOPIC_CONFIG.parse({"segment.bytes": 500})
    assert cfg.with_overrides({"segment.ms": "10"})["segment.ms"] == 10
    with pytest.raises(InvalidConfigError):
        cfg.with_overrides({"segment.ms": "0"})


# ----------------------------------------------------------------------- broker defaults
def test_topic_defaults_come_from_broker_log_keys():
    broker = BROKER_CONFIG.parse({"log.segment.bytes": "2048", "log.roll.ms": "60000",
                                  "log.message.timestamp.type": "LogAppendTime", "message.max.bytes": 999,
                                  "min.insync.replicas": "2", "log.retention.ms": "-1"})
    defaults = topic_defaults(broker)
    assert defaults["segment.bytes"] == 2048
    assert defaults["segment.ms"] == 60_000
    assert defaults["message.timestamp.type"] == "LogAppendTime"
    assert defaults["max.message.bytes"] == 999
    assert defaults["min.insync.replicas"] == 2
    assert defaults["retention.ms"] == -1

    topic = TOPIC_CONFIG.parse({"segment.ms": "5"}, defaults=defaults)
    assert topic["segment.bytes"] == 2048  # from the broker
    assert topic["segment.ms"] == 5        # the topic's own override wins
    assert dict(topic.overrides) == {"segment.ms": 5}


def test_broker_defaults_equal_topic_defaults_when_unset():
    assert topic_defaults(BROKER_CONFIG.parse({})) == dict(TOPIC_CONFIG.parse({}))


def test_every_topic_key_has_a_broker_key():
    for key in TOPIC_KEYS:
        assert key.broker_default in BROKER_CONFIG.keys, key.name


def test_broker_keys_are_validated_like_topic_keys():
    error = invalid(BROKER_CONFIG, {"log.segment.bytes": "99"})
    assert error.details == {"config": "log.segment.bytes"}


# ---------------------------------------------------------------------------------- errors
def test_unknown_key_is_refused_by_name():
    error = invalid(TOPIC_CONFIG, {"segment.byte": "100"})
    assert "segment.byte" in str(error)
    assert error.details == {"config": "segment.byte"}


@pytest.mark.parametrize("key, raw", [
    ("segment.bytes", "abc"),
    ("segment.bytes", "99"),                 # below the minimum of 100
    ("segment.bytes", str(INT_MAX + 1)),
    ("segment.bytes", 1.5),
    ("segment.bytes", True),
    ("segment.bytes", "1.0"),
    ("segment.ms", 0),
    ("retention.ms", "-2"),
    ("index.interval.bytes", -1),
    ("message.timestamp.type", "createtime"),
    ("message.timestamp.type", "Now"),
    ("unclean.leader.election.enable", "maybe"),
    ("unclean.leader.election.enable", 2),
    ("min.cleanable.dirty.ratio", "1.5"),
    ("min.cleanable.dirty.ratio", "abc"),
    ("min.cleanable.dirty.ratio", "nan"),
    ("cleanup.policy", "destroy"),
    ("cleanup.policy", "compact,"),
    ("min.insync.replicas", "0"),
])
def test_bad_value_is_refused_naming_the_key(key, raw):
    error = invalid(TOPIC_CONFIG, {key: raw})
    assert f"'{key}'" in str(error)
    assert error.details == {"config": key}


def test_first_unknown_key_is_reported_before_bad_values():
    error = invalid(TOPIC_CONFIG, {"segment.bytes": "bad", "nope": 1})
    assert error.details == {"config": "nope"}


# ------------------------------------------------------------------------------ properties
def test_read_properties(tmp_path):
    path = tmp_path / "broker.properties"
    path.write_text(
        "# a comment\n"
        "! another comment\n"
        "\n"
        "node.id=3\n"
        "  log.dirs = /data/riverlog  \n"
        "listeners:127.0.0.1:9093\n"
        "advertised.listeners=host:9094\n"
        "auto.create.topics.enable=\n",
        encoding="utf-8")
    values = read_properties(str(path))
    assert values == {"node.id": "3", "log.dirs": "/data/riverlog", "listeners": "127.0.0.1:9093",
                      "advertised.listeners": "host:9094", "auto.create.topics.enable": ""}


def test_read_properties_feeds_broker_config(tmp_path):
    path = tmp_path / "broker.properties"
    path.write_text("node.id=7\nlog.segment.bytes=4096\nauto.create.topics.enable=true\n", encoding="utf-8")
    cfg = BROKER_CONFIG.parse(read_properties(str(path)))
    assert (cfg["node.id"], cfg["log.segment.bytes"], cfg["auto.create.topics.enable"]) == (7, 4096, True)
    assert topic_defaults(cfg)["segment.bytes"] == 4096


def test_kafka_rules_across_and_within_topic_keys():
    # LogConfig.validateValues: the minimum compaction lag may not pass the maximum.
    with pytest.raises(InvalidConfigError, match=r"min.compaction.lag.ms \(10\) > max.compaction.lag.ms \(5\)"):
        TOPIC_CONFIG.parse({"min.compaction.lag.ms": 10, "max.compaction.lag.ms": 5})
    assert TOPIC_CONFIG.parse({"min.compaction.lag.ms": 5, "max.compaction.lag.ms": 5})["min.compaction.lag.ms"] == 5
    # retention.bytes has no validator in Kafka: any negative value is unbounded.
    assert TOPIC_CONFIG.parse({"retention.bytes": -2})["retention.bytes"] == -2


def test_incremental_append_and_subtract_change_a_list_part_by_part():
    from broker.config import APPEND, SUBTRACT, altered_list
    assert altered_list("cleanup.policy", "compact", APPEND, "delete") == "compact,delete"
    assert altered_list("cleanup.policy", "compact,delete", APPEND, "delete,compact") == "compact,delete"
    assert altered_list("cleanup.policy", "compact,delete", SUBTRACT, "compact") == "delete"
    assert altered_list("cleanup.policy", None, APPEND, "compact") == "compact"
    with pytest.raises(InvalidConfigError, match="Can't APPEND to key retention.ms because its type is not LIST"):
        altered_list("retention.ms", "1", APPEND, "2")


def test_read_properties_reads_a_server_properties_as_java_does(tmp_path):
    """``Properties.load``: a whitespace separator, a continued line, escapes, ``:`` in a value;
    each value then trimmed as Kafka's ConfigDef trims what it parses."""
    path = tmp_path / "server.properties"
    path.write_text("node.id 4\n"
                    "listeners=PLAINTEXT://127.0.0.1:9092,\\\n"
                    "          CONTROLLER://127.0.0.1:9093\n"
                    "log.dirs=/data/a\\u0020b\n", encoding="utf-8")
    assert read_properties(str(path)) == {"node.id": "4", "log.dirs": "/data/a b",
                                          "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093"}


def test_a_malformed_unicode_escape_is_refused_as_java_refuses_it(tmp_path):
    path = tmp_path / "server.properties"
    path.write_text("log.dirs=/data/\\u00zz\n", encoding="utf-8")
    with pytest.raises(ValueError, match="Malformed"):
        read_properties(str(path))
