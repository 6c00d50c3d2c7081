"""The librdkafka keys a Python user passes: honoured under Kafka's names, or refused with a reason."""
from __future__ import annotations

import json
import logging

import pytest

from broker.client.client_events import ClientEvents
from broker.client.config import CONSUMER_CONFIG, PRODUCER_CONFIG, client_config
from broker.errors import InvalidConfigError, KafkaError, ProducerFencedError


def test_keywords_and_dict_merge():
    cfg = client_config(PRODUCER_CONFIG, {"bootstrap.servers": "a:1"}, {"acks": "1"})
    assert cfg["bootstrap.servers"] == "a:1" and cfg["acks"] == "1"
    assert client_config(PRODUCER_CONFIG, None, {"bootstrap.servers": "b:2"})["bootstrap.servers"] == "b:2"


@pytest.mark.parametrize("alias, key, value, expected", [
    ("message.timeout.ms", "delivery.timeout.ms", 5000, 5000),
    ("queue.buffering.max.ms", "linger.ms", 20, 20),
    ("queue.buffering.max.kbytes", "buffer.memory", 2048, 2048 * 1024),
    ("socket.timeout.ms", "request.timeout.ms", 7000, 7000),
    ("topic.metadata.refresh.interval.ms", "metadata.max.age.ms", 1000, 1000),
])
def test_aliases_become_kafkas_names(alias, key, value, expected):
    assert client_config(PRODUCER_CONFIG, {alias: value}, {})[key] == expected


def test_alias_and_name_disagreeing_is_refused():
    with pytest.raises(InvalidConfigError, match="message.timeout.ms"):
        client_config(PRODUCER_CONFIG, {"message.timeout.ms": 1000, "delivery.timeout.ms": 2000}, {})


@pytest.mark.parametrize("name, value", [("ssl.ca.location", "/x"), ("sasl.mechanism", "PLAIN"),
                                         ("security.protocol", "SASL_SSL")])
def test_security_keys_are_refused_with_what_to_do(name, value):
    with pytest.raises(InvalidConfigError, match="not supported"):
        client_config(PRODUCER_CONFIG, {name: value}, {})
    assert client_config(PRODUCER_CONFIG, {"security.protocol": "PLAINTEXT"}, {})


def test_debug_contexts_are_checked():
    assert client_config(CONSUMER_CONFIG, {"debug": "consumer,cgrp"}, {})["debug"] == "consumer,cgrp"
    with pytest.raises(InvalidConfigError, match="unknown context"):
        client_config(CONSUMER_CONFIG, {"debug": "consumer,telepathy"}, {})


def test_enable_auto_offset_store_is_a_consumer_key():
    assert client_config(CONSUMER_CONFIG, {"enable.auto.offset.store": "false"}, {})["enable.auto.offset.store"] is False
    assert "enable.auto.offset.store" not in client_config(PRODUCER_CONFIG, {"enable.auto.offset.store": False}, {})


def test_one_dict_configures_a_producer_and_a_consumer_as_with_librdkafka(caplog, monkeypatch):
    """librdkafka accepts the other client type's properties (ignoring them, with a warning) and
    its generic ones; a shared confluent-kafka configuration used to be refused."""
    monkeypatch.setattr("broker.client.config._warned", set())  # warnings are once per process
    shared = {"bootstrap.servers": "a:1", "group.id": "g", "auto.offset.reset": "earliest", "acks": "all",
              "linger.ms": 20, "queue.buffering.max.ms": 20, "socket.keepalive.enable": True,
              "api.version.request": True, "broker.address.family": "v4", "client.rack": "r1",
              "retry.backoff.max.ms": 1000, "group.protocol": "consumer", "enable.metrics.push": False}
    with caplog.at_level(logging.WARNING, "broker.client.config"):
        producer = client_config(PRODUCER_CONFIG, shared, {})
        consumer = client_config(CONSUMER_CONFIG, shared, {})
        client_config(CONSUMER_CONFIG, shared, {})
    assert producer["acks"] == "all" and producer["linger.ms"] == 20 and "group.id" not in producer
    assert consumer["group.id"] == "g" and "acks" not in consumer and "linger.ms" not in consumer
    warnings = [r.getMessage() for r in caplog.records]
    assert "Configuration property group.id is a consumer property and will be ignored by this producer " \
           "instance" in warnings
    assert "Configuration property acks is a producer property and will be ignored by this consumer instance" \
           in warnings
    assert len(warnings) == len(set(warnings)), "each ignored key is warned about once"


@pytest.mark.parametrize("kind, alias, key, value, expected", [
    (PRODUCER_CONFIG, "request.required.acks", "acks", -1, "-1"),
    (PRODUCER_CONFIG, "max.in.flight", "max.in.flight.requests.per.connection", 3, 3),
    (PRODUCER_CONFIG, "message.send.max.retries", "retries", 7, 7),
    (CONSUMER_CONFIG, "fetch.message.max.bytes", "max.partition.fetch.bytes", 4096, 4096),
])
def test_librdkafka_aliases_of_kafka_keys(kind, alias, key, value, expected):
    assert client_config(kind, {alias: value}, {})[key] == expected


@pytest.mark.parametrize("kind, name", [(PRODUCER_CONFIG, "lingr.ms"), (CONSUMER_CONFIG, "group.idd"),
                                        (CONSUMER_CONFIG, "on_delivery"), (PRODUCER_CONFIG, "on_commit")])
def test_typos_and_the_other_clients_python_callbacks_are_still_refused(kind, name):
    with pytest.raises(InvalidConfigError, match=f"unknown {kind.what} configuration '{name}'"):
        client_config(kind, {name: 1}, {})


def test_error_cb_stats_cb_logger_and_debug_are_served_on_poll():
    seen, stats, now = [], [], [0.0]
    target = logging.getLogger("test-client-events")
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    target.addHandler(handler)
    target.setLevel(logging.DEBUG)
    cfg = client_config(PRODUCER_CONFIG, {"error_cb": seen.append, "stats_cb": stats.append,
                                          "statistics.interval.ms": 1000, "logger": target, "debug": "eos"}, {})
    events = ClientEvents(cfg, "producer", lambda: {"msg_cnt": 3}, clock=lambda: now[0])
    try:
        events.error(ProducerFencedError("fenced"))
        assert seen == [] and events.serve() == 1
        assert seen == [KafkaError.PRODUCER_FENCED] and seen[0].fatal()
        now[0] = 1.0
        events.serve()
        assert json.loads(stats[0])["msg_cnt"] == 3 and json.loads(stats[0])["type"] == "producer"
        logging.getLogger("broker.client.transactions").debug("hello")
        assert [r.getMessage() for r in records] == ["hello"]
    finally:
        events.close()
        target.removeHandler(handler)
    logging.getLogger("broker.client.transactions").debug("after close")
    assert len(records) == 1


@pytest.mark.parametrize("value,why", [("bogus", "unknown partition.assignment.strategy 'bogus'"),
                                       ("range,cooperative-sticky", "mixes eager and cooperative"),
                                       ("roundrobin, sticky", "unknown partition.assignment.strategy 'sticky'")])
def test_an_assignor_list_librdkafka_refuses_is_refused_when_the_consumer_is_made(value, why):
    """rd_kafka_assignors_init refuses both at rd_kafka_new, not when the member joins."""
    with pytest.raises(InvalidConfigError, match=why) as e:
        client_config(CONSUMER_CONFIG, {"group.id": "g", "partition.assignment.strategy": value}, {})
    assert '"partition.assignment.strategy"' in str(e.value)


def test_assignor_lists_of_one_protocol_are_taken():
    for value in ("range", "roundrobin,range", "cooperative-sticky", "RANGE"):
        cfg = client_config(CONSUMER_CONFIG, {"group.id": "g", "partition.assignment.strategy": value}, {})
        assert cfg["partition.assignment.strategy"] == value
