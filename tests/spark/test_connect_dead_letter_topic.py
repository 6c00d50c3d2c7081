"""The dead-letter queue after a topic rename, and its topic: a record that fails after a
``RegexRouter`` renamed its topic is reported under the topic it was consumed from (Kafka's
``context.original().topic()``), in the DLQ's ``__connect.errors.topic`` header and in the failure
message; the DLQ topic is made when the connector starts (one partition, the replication factor
capped by the registered brokers), one already there is used as it is, and a replication factor
of 0 is refused at creation, on its field."""
from __future__ import annotations

import logging

import pytest
from broker.client import AdminClient, NewTopic

from tests.conftest import wait_until
from tests.spark.connect_helpers import produce, read_committed

pytestmark = [pytest.mark.spark, pytest.mark.integration]

JSON = "org.apache.kafka.connect.json.JsonConverter"
RF = "errors.deadletterqueue.topic.replication.factor"


def _topic(bootstrap: str, topic: str):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        return admin.list_topics(timeout=30).topics.get(topic)
    finally:
        admin.close()


def _registered(bootstrap: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        return len(admin.describe_cluster(include_fenced_brokers=True).result(30).nodes)
    finally:
        admin.close()


def test_dead_letters_name_the_consumed_topic_and_the_topic_is_made_at_start(spark, spark_broker, tmp_path, caplog):
    from connect import Worker
    from connect.errors import ConfigError
    bootstrap = spark_broker.bootstrap
    produce(bootstrap, "routed", [b'{"id": 1, "n": "5"}', b'{"id": 2, "n": "x"}', b'{"id": 3, "n": "7"}'])
    produce(bootstrap, "routed-strict", [b'{"id": 1, "n": "x"}'])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        admin.create_topics([NewTopic("kept-dlq", 3, 1)])["kept-dlq"].result(30)
    finally:
        admin.close()
    w = Worker(spark, {"bootstrap.servers": bootstrap, "group.id": "connect-dlq-topic",
                       "state.dir": str(tmp_path / "state")}).start()
    routed = {"connector.class": "DirectorySink", "key.converter": "StringConverter", "value.converter": JSON,
              "value.converter.schemas.enable": "false", "transforms": "route,cast",
              "transforms.route.type": "RegexRouter", "transforms.route.regex": "(.*)",
              "transforms.route.replacement": "renamed-$1", "transforms.cast.type": "Cast$Value",
              "transforms.cast.spec": "n:int32"}
    try:
        with pytest.raises(ConfigError) as refused:
            w.create_connector("zero", {**routed, "topics": "routed", "path": str(tmp_path / "zero"),
                                        "errors.deadletterqueue.topic.name": "zero-dlq", RF: "0"})
        assert list(refused.value.details["errors"]) == [RF]
        with caplog.at_level(logging.WARNING, logger="connect.errors"):
            w.create_connector("routed", {**routed, "topics": "routed", "path": str(tmp_path / "out"),
                                          "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "routed-dlq",
                                          "errors.deadletterqueue.context.headers.enable": "true"})
            # tolerance none: the DLQ is never written, yet made at start as Kafka makes it
            w.create_connector("strict", {**routed, "topics": "routed-strict", "path": str(tmp_path / "strict"),
                                          "errors.deadletterqueue.topic.name": "strict-dlq"})
            w.create_connector("kept", {**routed, "topics": "routed-strict", "path": str(tmp_path / "kept"),
                                        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "kept-dlq"})
            dlq = wait_until(lambda: read_committed(bootstrap, "routed-dlq"), 90, 0.3, "the dead letter")
            failed = wait_until(lambda: (s := w.connector_status("strict"))["connector"]["state"] == "FAILED" and s,
                                90, 0.3, "the strict connector FAILED")
            wait_until(lambda: read_committed(bootstrap, "kept-dlq"), 90, 0.3, "the kept topic's dead letter")
    finally:
        w.close()
    headers = {k: v.decode() for k, v in dlq[0].headers()}
    assert [m.value() for m in dlq] == [b'{"id": 2, "n": "x"}']
    assert headers["__connect.errors.topic"] == "routed"      # consumed, not "renamed-routed"
    assert headers["__connect.errors.stage"] == "TRANSFORMATION" and headers["__connect.errors.offset"] == "1"
    assert "topic 'routed-strict' partition 0 offset 0" in failed["connector"]["trace"]

    registered = _registered(bootstrap)
    for name in ("routed-dlq", "strict-dlq"):
        meta = _topic(bootstrap, name)
        assert meta is not None and meta.error is None and list(meta.partitions) == [0]
        assert len(meta.partitions[0].replicas) == min(3, registered)
    assert len(_topic(bootstrap, "kept-dlq").partitions) == 3     # there already: used as it is
    if registered < 3:
        assert any("exceeds the" in r.getMessage() and "'strict-dlq'" in r.getMessage() for r in caplog.records)
    assert _topic(bootstrap, "zero-dlq") is None
