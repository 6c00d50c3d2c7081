"""``errors.deadletterqueue.topic.replication.factor``: refused unless positive or -1 (the
broker's default), per field, and capped by the registered brokers when the topic is made."""
from __future__ import annotations

import pytest

from connect.config import parse_connector_config, validate
from connect.config_def import Plugin
from connect.dead_letter_topic import capped
from connect.errors import ConfigError

pytestmark = pytest.mark.unit

SINK = Plugin("test.DlqSink", kind="sink")
RF = "errors.deadletterqueue.topic.replication.factor"


def _sink(**extra):
    return {"name": "s", "connector.class": "test.DlqSink", "topics": "orders",
            "errors.deadletterqueue.topic.name": "orders-dlq", **extra}


def test_the_replication_factor_is_positive_or_minus_one():
    assert validate(_sink(**{RF: "0"}), SINK).errors() == {
        RF: ["Invalid value 0 for configuration errors.deadletterqueue.topic.replication.factor: "
             "Replication factor must be positive, or -1 to use the broker's default"]}
    assert list(validate(_sink(**{RF: "-2"}), SINK).errors()) == [RF]
    assert validate(_sink(**{RF: "-1"}), SINK).errors() == {}
    with pytest.raises(ConfigError) as e:
        parse_connector_config(_sink(**{RF: "0"}), SINK)
    assert list(e.value.details["errors"]) == [RF]
    assert parse_connector_config(_sink(), SINK).dlq_topic_replication_factor == 3   # Kafka's default
    assert parse_connector_config(_sink(**{RF: "2"}), SINK).dlq_topic_replication_factor == 2


def test_the_replication_factor_is_capped_by_the_registered_brokers():
    assert capped(3, 1) == 1 and capped(3, 5) == 3 and capped(2, 2) == 2
    assert capped(-1, 1) == -1      # the broker's default, left to the broker


@pytest.mark.integration
def test_a_dlq_topic_that_cannot_be_made_fails_the_start_as_kafka_words_it():
    from connect.dead_letter_topic import ensure_dead_letter_topic
    from connect.errors import ConnectError
    with pytest.raises(ConnectError, match="^Could not initialize dead letter queue with topic=orders-dlq"):
        ensure_dead_letter_topic({"bootstrap.servers": "127.0.0.1:1"}, parse_connector_config(_sink(), SINK),
                                 timeout=2)
