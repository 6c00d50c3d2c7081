"""``StreamsApp``'s config against Kafka's StreamsConfigTest: required keys refused as Kafka's
ConfigException, Kafka's types and validators applied to the keys Riverlog accepts without using
them, and client settings given without a prefix reaching every client that has them
(``shouldForwardCustomConfigsWithNoPrefixToAllClients``, ``shouldSupportNonPrefixedProducerConfigs``,
``shouldOverrideNonPrefixedCustomConfigsWithPrefixedConfigs``). No Spark, no broker."""
from __future__ import annotations

import logging

import pytest

from broker.errors import InvalidConfigError
from streams.app import StreamsApp
from streams.app_config import _client, _config
from streams.builder import StreamsBuilder
from streams.errors import TopologyError
from streams.parameters import Consumed
from streams.serdes import Serdes

pytestmark = pytest.mark.unit

APP = {"application.id": "app", "bootstrap.servers": "127.0.0.1:1"}


def app(config: dict) -> StreamsApp:
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(Serdes.String(), Serdes.String())).to("out")
    return StreamsApp(b.build(), None, config)


@pytest.mark.parametrize("missing", ["application.id", "bootstrap.servers"])
def test_a_missing_required_key_is_kafkas_config_exception_naming_it(missing):
    """StreamsConfigTest.shouldThrowExceptionIfApplicationIdIsNotSet / ...BootstrapServersIsNotSet:
    a ConfigException (InvalidConfigError), not a TopologyException."""
    config = {k: v for k, v in APP.items() if k != missing}
    with pytest.raises(InvalidConfigError) as e:
        app(config)
    assert not isinstance(e.value, TopologyError)
    assert e.value.details["config"] == missing
    assert str(e.value.message) == f'Missing required configuration "{missing}" which has no default value.'


@pytest.mark.parametrize("key,value,why", [
    ("num.stream.threads", "abc", "Not a number of type INT"),
    ("num.stream.threads", 2**31, "Not a number of type INT"),
    ("num.standby.replicas", 1.5, "Expected value to be a 32-bit integer"),
    ("acceptable.recovery.lag", -1, "Value must be at least 0"),         # ...AcceptableRecoveryLagIsOutsideBounds
    ("max.warmup.replicas", 0, "Value must be at least 1"),              # ...MaxWarmupReplicasIsOutsideBounds
    ("probing.rebalance.interval.ms", 59_999, "Value must be at least 60000"),
    ("task.timeout.ms", "-1", "Value must be at least 0"),
    ("metrics.recording.level", "WARN", "String must be one of: INFO, DEBUG, TRACE"),
    ("built.in.metrics.version", "0.10.0-2.4", "String must be one of: latest"),   # ...BuiltInMetricsVersionInvalid
    ("default.dsl.store", "lmdb", "String must be one of: rocksDB, in_memory"),     # ...StoreTypeConfigNotValueInRange
    ("rack.aware.assignment.strategy", "x", "String must be one of: none, min_traffic, balance_subtopology"),
    ("upgrade.from", "0.9", "String must be one of: 0.10.0"),
    ("enable.metrics.push", "yes", "Expected value to be either true or false"),
    ("security.protocol", "TLS", "String must be one of (case insensitive): PLAINTEXT"),  # testInvalidSecurityProtocol
])
def test_a_value_kafkas_config_def_refuses_is_refused_though_riverlog_does_not_apply_the_key(key, value, why):
    with pytest.raises(InvalidConfigError) as e:
        _config({**APP, key: value})
    assert e.value.details["config"] == key
    assert str(e.value.message).startswith(f"Invalid value {value} for configuration {key}: {why}")


def test_values_kafka_accepts_are_accepted(caplog):
    fine = {"num.stream.threads": " 4 ", "num.standby.replicas": 1, "acceptable.recovery.lag": 0,
            "max.warmup.replicas": "1", "probing.rebalance.interval.ms": 60_000, "metrics.recording.level": "DEBUG",
            "upgrade.from": "3.8", "enable.metrics.push": "False", "security.protocol": "plaintext",
            "default.dsl.store": "in_memory", "num.stream.threads.typo": "x"}
    with caplog.at_level(logging.INFO, logger="streams"):
        c = _config({**APP, **fine})
    assert c["num.stream.threads"] == " 4 "     # kept as given: nothing here reads it
    assert "'num.stream.threads.typo'" in caplog.text and "were supplied but are not used yet" in caplog.text


def test_a_security_protocol_riverlogs_clients_cannot_speak_is_refused_not_ignored():
    """Kafka would encrypt with SSL; an application that went on in plaintext would ignore it."""
    with pytest.raises(InvalidConfigError) as e:
        _config({**APP, "security.protocol": "SSL"})
    assert e.value.details["config"] == "security.protocol" and "plaintext" in str(e.value)


def test_a_client_setting_without_prefix_reaches_every_client_that_has_it(caplog):
    """Kafka's getClientPropsWithPrefix: a client's own key given unprefixed goes to that client
    (``request.timeout.ms`` to all three, ``linger.ms`` to the producer, ``fetch.max.bytes`` to the
    consumer); the prefixed value wins; ``main.consumer.`` wins over ``consumer.``."""
    given = {"request.timeout.ms": "7000", "linger.ms": "5", "fetch.max.bytes": "1000",
             "consumer.request.timeout.ms": "8000", "main.consumer.fetch.max.bytes": "2000",
             "producer.linger.ms": "6", "retry.backoff.ms": "150", "admin.retry.backoff.ms": "250"}
    with caplog.at_level(logging.INFO, logger="streams"):
        a = app({**APP, **given})
    assert _client(a.config, "producer.") == {"request.timeout.ms": "7000", "linger.ms": "6",
                                              "retry.backoff.ms": "150"}
    assert _client(a.config, "consumer.", "main.consumer.") == {"request.timeout.ms": "8000",
                                                                 "fetch.max.bytes": "2000",
                                                                 "retry.backoff.ms": "150"}
    assert a.admin == {"bootstrap.servers": "127.0.0.1:1", "request.timeout.ms": "7000", "retry.backoff.ms": "250"}
    unused = [r.getMessage() for r in caplog.records if "not used yet" in r.getMessage()]
    assert not any("linger.ms" in m or "request.timeout.ms" in m or "fetch.max.bytes" in m for m in unused)


def test_settings_riverlog_decides_are_not_taken_unprefixed_and_are_named_in_a_warning(caplog):
    """Kafka resets a user's ``isolation.level`` / ``enable.auto.commit`` / ``transactional.id``;
    ``client.id`` and ``bootstrap.servers`` keep Streams' meaning (not forwarded as a client's)."""
    given = {"isolation.level": "read_uncommitted", "acks": "0", "group.id": "other", "client.id": "me",
             "enable.idempotence": "false"}
    with caplog.at_level(logging.INFO, logger="streams"):
        c = _config({**APP, **given})
    assert _client(c, "producer.") == {} and _client(c, "consumer.", "main.consumer.") == {}
    assert _client(c, "admin.") == {}
    ignored = next(r.getMessage() for r in caplog.records if "were ignored" in r.getMessage())
    for key in ("isolation.level", "acks", "group.id", "enable.idempotence"):
        assert f"'{key}'" in ignored


def test_the_keys_handed_out_unprefixed_are_keys_of_riverlogs_clients():
    """The forwarded names are the Kafka client keys Riverlog's clients have: a key they lost would
    make every application that sets it fail to start."""
    from broker.client.config import ADMIN_CONFIG, CONSUMER_CONFIG, PRODUCER_CONFIG
    from streams.app_config import _names
    for prefix, kind in (("producer.", PRODUCER_CONFIG), ("consumer.", CONSUMER_CONFIG), ("admin.", ADMIN_CONFIG)):
        assert _names(prefix) - set(kind.keys) == set()
    assert "linger.ms" in _names("producer.") and "fetch.max.bytes" in _names("main.consumer.")


@pytest.mark.parametrize("key,value,message", [
    ("max.in.flight.requests.per.connection", 7,
     "Invalid value 7 for configuration max.in.flight.requests.per.connection: Can't exceed 5 when exactly-once "
     "processing is enabled"),
    ("producer.max.in.flight.requests.per.connection", "not-a-number",
     "Invalid value not-a-number for configuration max.in.flight.requests.per.connection: String value could "
     "not be parsed as 32-bit integer"),
])
def test_more_than_five_requests_in_flight_are_refused_under_exactly_once_when_the_app_is_made(key, value, message):
    """StreamsConfigTest.shouldThrowExceptionIfMaxInFlightRequestsGreaterThanFiveIfEosV2Enabled and
    ...IsInvalidStringIfEosV2Enabled; under at_least_once the producer may keep more."""
    with pytest.raises(InvalidConfigError) as e:
        app({**APP, "processing.guarantee": "exactly_once_v2", key: value})
    assert str(e.value.message) == message
    assert e.value.details["config"] == "max.in.flight.requests.per.connection"
    assert _client(_config({**APP, "processing.guarantee": "at_least_once", key: 7}), "producer.") == \
        {"max.in.flight.requests.per.connection": 7}
    assert _client(_config({**APP, key: " 3 "}), "producer.") == {"max.in.flight.requests.per.connection": " 3 "}


def test_the_test_driver_refuses_what_kafkas_streams_config_refuses():
    """Kafka's TopologyTestDriver builds a StreamsConfig: a value its ConfigDef refuses fails there too."""
    from streams import StreamsBuilder
    from streams.testing import TopologyTestDriver
    b = StreamsBuilder()
    b.stream("in").to("out")
    with pytest.raises(InvalidConfigError, match="num.stream.threads: Not a number of type INT"):
        TopologyTestDriver(b.build(), {"application.id": "a", "num.stream.threads": "abc"})
