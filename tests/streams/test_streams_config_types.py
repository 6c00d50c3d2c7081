"""The keys Riverlog applies (``commit.interval.ms``, ``statestore.cache.max.bytes``,
``repartition.purge.interval.ms``, ``replication.factor``, ``auto.offset.reset``) are parsed as
Kafka's ``ConfigDef`` parses them: a ``LONG``/``INT`` takes an integer or a string of one, never a
float or a bool (Java's Double or Boolean is refused, not truncated), and a refusal is Kafka's
``ConfigException`` text naming the key."""
from __future__ import annotations

import pytest

from broker.errors import InvalidConfigError
from streams.app import _config
from streams.builder import StreamsBuilder
from streams.parameters import Consumed, Produced
from streams.serdes import Serdes
from streams.testing import TopologyTestDriver

APP = {"application.id": "app", "bootstrap.servers": "127.0.0.1:1"}
S = Serdes.String()


def copy():
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(S, S)).to("out", Produced.with_(S, S))
    return b.build()


@pytest.mark.parametrize("key,value,message", [
    ("commit.interval.ms", 1.5, "Invalid value 1.5 for configuration commit.interval.ms: Expected value to be a "
                                "64-bit integer, but it was a float"),
    ("commit.interval.ms", True, "Invalid value True for configuration commit.interval.ms: Expected value to be a "
                                 "64-bit integer, but it was a bool"),
    ("commit.interval.ms", "abc", "Invalid value abc for configuration commit.interval.ms: Not a number of type LONG"),
    ("commit.interval.ms", -1, "Invalid value -1 for configuration commit.interval.ms: Value must be at least 0"),
    ("statestore.cache.max.bytes", "-1",
     "Invalid value -1 for configuration statestore.cache.max.bytes: Value must be at least 0"),
    ("cache.max.bytes.buffering", 0.5, "Invalid value 0.5 for configuration cache.max.bytes.buffering: Expected value "
                                       "to be a 64-bit integer, but it was a float"),
])
def test_an_applied_long_key_is_parsed_as_kafkas_config_def_by_the_app_and_the_driver(key, value, message):
    for make in (lambda c: _config(c), lambda c: TopologyTestDriver(copy(), c)):
        with pytest.raises(InvalidConfigError) as e:
            make({**APP, key: value})
        assert e.value.details["config"] == key
        assert str(e.value.message) == message


@pytest.mark.parametrize("key,value,message", [
    ("repartition.purge.interval.ms", 2.5, "Invalid value 2.5 for configuration repartition.purge.interval.ms: "
                                           "Expected value to be a 64-bit integer, but it was a float"),
    ("replication.factor", "abc", "Invalid value abc for configuration replication.factor: Not a number of type INT"),
    ("replication.factor", 1.0, "Invalid value 1.0 for configuration replication.factor: Expected value to be a "
                                "32-bit integer, but it was a float"),
    ("auto.offset.reset", "smallest",
     "Invalid value smallest for configuration auto.offset.reset: String must be one of: latest, earliest, none"),
])
def test_the_apps_own_keys_are_refused_with_kafkas_message(key, value, message):
    with pytest.raises(InvalidConfigError) as e:
        _config({**APP, key: value})
    assert e.value.details["config"] == key
    assert str(e.value.message) == message


def test_integers_and_their_strings_are_taken():
    c = _config({**APP, "commit.interval.ms": " 250 ", "statestore.cache.max.bytes": 0,
                 "repartition.purge.interval.ms": "5", "replication.factor": "3", "max.task.idle.ms": -1})
    assert (c["commit.interval.ms"], c["statestore.cache.max.bytes"], c["repartition.purge.interval.ms"],
            c["replication.factor"], c["max.task.idle.ms"]) == (250, 0, 5, 3, -1)
