"""Cluster metadata: records applied to the image, and topic name rules."""
from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.config import BROKER_CONFIG, topic_defaults
from broker.controller.quorum_controller import QuorumController
from broker.errors import InvalidTopicError
from broker.metadata.image import MAX_TOPIC_NAME, MetadataImage, validate_topic_name

pytestmark = pytest.mark.unit


def topic(name, topic_id="id-1", replicas=((0,),)) -> dict:
    return {"type": "topic", "name": name, "topic_id": topic_id, "replicas": [list(r) for r in replicas]}


def config(name, key, value, resource="topic") -> dict:
    return {"type": "config", "resource": resource, "name": name, "key": key, "value": value}


def remove(name, topic_id="id-1") -> dict:
    return {"type": "remove_topic", "name": name, "topic_id": topic_id}


def image_of(*records) -> MetadataImage:
    image = MetadataImage()
    for record in records:
        image.apply(record)
    return image


# ---------------------------------------------------------------------------------- image
def test_topic_record_creates_a_topic():
    image = image_of(topic("orders", "abc", [(0, 1), (1, 2), (2, 0)]))
    t = image.topics["orders"]
    assert (t.name, t.topic_id, t.replicas, t.configs) == ("orders", "abc", [[0, 1], [1, 2], [2, 0]], {})
    assert t.num_partitions == 3


def test_config_records_set_and_remove_topic_configs():
    image = image_of(topic("orders"), config("orders", "retention.ms", "1000"),
                     config("orders", "segment.bytes", "2048"), config("orders", "retention.ms", "5"))
    assert image.topics["orders"].configs == {"retention.ms": "5", "segment.bytes": "2048"}
    image.apply(config("orders", "retention.ms", None))
    assert image.topics["orders"].configs == {"segment.bytes": "2048"}
    image.apply(config("orders", "never.set", None))  # removing an unset key is harmless
    assert image.topics["orders"].configs == {"segment.bytes": "2048"}


def test_config_for_an_unknown_topic_is_ignored():
    image = image_of(config("ghost", "retention.ms", "1"))
    assert image.topics == {} and image.broker_configs == {}


def test_broker_config_records():
    image = image_of(config("", "log.retention.ms", "10", resource="broker"),
                     config("", "num.partitions", "3", resource="broker"),
                     config("", "log.retention.ms", None, resource="broker"))
    assert image.broker_configs == {"num.partitions": "3"}


def test_remove_topic_needs_the_matching_id():
    image = image_of(topic("orders", "new-id"))
    image.apply(remove("orders", "old-id"))  # a stale removal of an earlier incarnation
    assert "orders" in image.topics
    image.apply(remove("orders", "new-id"))
    assert image.topics == {}
    image.apply(remove("orders", "new-id"))  # removing again is harmless
    assert image.topics == {}


def test_recreated_topic_starts_without_the_old_configs():
    image = image_of(topic("orders", "a"), config("orders", "retention.ms", "1"), remove("orders", "a"),
                     topic("orders", "b", [(0,), (0,)]))
    t = image.topics["orders"]
    assert (t.topic_id, t.num_partitions, t.configs) == ("b", 2, {})


def test_unknown_record_type_is_refused():
    with pytest.raises(ValueError):
        MetadataImage().apply({"type": "bogus"})


# ----------------------------------------------------------------------------- topic names
@pytest.mark.parametrize("name", ["a.b_c-1", "a", "A", "0", "...", "a..b", "_", "-", "x" * MAX_TOPIC_NAME,
                                  "__consumer_offsets"])
def test_legal_topic_names(name):
    """A legal name passes the check and the controller creates the topic under exactly that name."""
    assert validate_topic_name(name) is None
    controller = QuorumController(BROKER_CONFIG.parse({}), random.Random(0))
    one_broker = image_of({"type": "register_broker", "node_id": 1, "host": "127.0.0.1", "port": 9092,
                           "incarnation": "i"}, {"type": "broker_state", "node_id": 1, "fenced": False})
    records = controller.create_topic(one_broker, name, -1, -1, {}, topic_defaults(BROKER_CONFIG.parse({})),
                                      assignment=[[1]], internal=name.startswith("__"))
    image = image_of(*records)
    assert list(image.topics) == [name] and image.topics[name].name == name


@pytest.mark.parametrize("name", ["", ".", "..", "x" * (MAX_TOPIC_NAME + 1), "a b", "a/b", "a\\b", "a:b",
                                  "a*", "topic!", "tópico", "a\tb", "\n", "a\0b", "name\n", "\nname"],
                         ids=lambda n: repr(n)[:20])
def test_illegal_topic_names(name):
    with pytest.raises(InvalidTopicError):
        validate_topic_name(name)


LEGAL_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"


@settings(max_examples=100, deadline=None, database=None, derandomize=True)
@given(name=st.text(max_size=260) | st.text(alphabet=LEGAL_CHARS + " /:\t\né\0", max_size=260))
def test_topic_name_rule_matches_kafka(name):
    legal_chars = set(LEGAL_CHARS)
    legal = 0 < len(name) <= MAX_TOPIC_NAME and name not in (".", "..") and set(name) <= legal_chars
    if legal:
        validate_topic_name(name)
    else:
        with pytest.raises(InvalidTopicError):
            validate_topic_name(name)


def test_partition_changes_bump_epochs_deterministically():
    image = image_of(topic("orders", "abc", [(1, 2, 3)]))
    p = image.topics["orders"].partitions[0]
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (1, [1, 2, 3], 0, 0)
    image.apply({"type": "partition_change", "topic_id": "abc", "partition": 0, "isr": [1, 3]})
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (1, [1, 3], 0, 1)
    image.apply({"type": "partition_change", "topic_id": "abc", "partition": 0, "leader": 3, "isr": [3]})
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (3, [3], 1, 2)
    image.apply({"type": "partition_change", "topic_id": "other", "partition": 0, "leader": 1})
    assert p.leader == 3, "a change for another topic id is ignored"


def test_broker_registration_takes_its_epoch_from_the_record_offset():
    image = MetadataImage()
    image.apply({"type": "register_broker", "node_id": 4, "host": "h", "port": 1, "incarnation": "x"}, 17)
    b = image.brokers[4]
    assert (b.broker_epoch, b.fenced, image.live_brokers()) == (17, True, [])
    image.apply({"type": "broker_state", "node_id": 4, "fenced": False}, 18)
    assert image.live_brokers() == [4] and image.offset == 18
    image.apply({"type": "broker_state", "node_id": 4, "shutting_down": True}, 19)
    assert image.live_brokers() == []
