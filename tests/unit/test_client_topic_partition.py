"""TopicPartition behaves as confluent-kafka's C type (src/confluent_kafka/src/confluent_kafka.c)."""
from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.client import OFFSET_INVALID, TopicPartition

pytestmark = pytest.mark.unit


def test_defaults_are_confluents():
    tp = TopicPartition("t")
    assert (tp.topic, tp.partition, tp.offset, tp.metadata, tp.leader_epoch, tp.error) == \
        ("t", -1, OFFSET_INVALID, None, None, None)


def test_a_negative_leader_epoch_reads_as_none():
    assert TopicPartition("t", 0, 5, leader_epoch=-1).leader_epoch is None
    assert TopicPartition("t", 0, 5, "m", 7).leader_epoch == 7


def test_repr_and_str_have_confluents_shape():
    tp = TopicPartition("orders", 3, 42, "m", 5)
    assert repr(tp) == str(tp) == "TopicPartition{topic=orders,partition=3,offset=42,leader_epoch=5,error=None}"
    assert repr(TopicPartition("t")) == "TopicPartition{topic=t,partition=-1,offset=-1001,leader_epoch=None,error=None}"


def test_equal_and_hashed_by_topic_and_partition_only():
    a, b = TopicPartition("t", 0, 5, "x", 1), TopicPartition("t", 0, 9)
    assert a == b and not a != b and hash(a) == hash(b) and len({a, b}) == 1
    assert TopicPartition("t", 0) != TopicPartition("t", 1) and TopicPartition("t", 0) != TopicPartition("u", 0)
    assert hash(a) == hash("t") ^ 0


def test_comparing_with_another_type_raises_not_implemented_error():
    with pytest.raises(NotImplementedError):
        TopicPartition("t", 0) == ("t", 0)  # noqa: B015 - the comparison is what is tested
    with pytest.raises(NotImplementedError):
        TopicPartition("t", 0) < ("t", 1)  # noqa: B015


@given(st.lists(st.tuples(st.text(max_size=4), st.integers(-1, 50), st.integers(-2, 10)), max_size=12))
def test_ordering_is_by_topic_then_partition(items):
    tps = [TopicPartition(t, p, o) for t, p, o in items]
    assert [(tp.topic, tp.partition) for tp in sorted(tps)] == sorted((t, p) for t, p, _ in items)
    for x in tps[:4]:
        for y in tps[:4]:
            k, m = (x.topic, x.partition), (y.topic, y.partition)
            assert (x < y, x <= y, x > y, x >= y, x == y) == (k < m, k <= m, k > m, k >= m, k == m)


def test_topic_metadata_leader_epoch_and_error_are_read_only_partition_and_offset_are_not():
    tp = TopicPartition("t", 0)
    for name in ("topic", "metadata", "leader_epoch", "error"):
        with pytest.raises(AttributeError):
            setattr(tp, name, None)
    tp.partition, tp.offset = 4, 10
    assert (tp.partition, tp.offset) == (4, 10)


def test_arguments_of_the_wrong_type_are_refused():
    for args in [(None,), ("t", "0"), ("t", 0, 1.5), ("t", 0, 1, b"m")]:
        with pytest.raises(TypeError):
            TopicPartition(*args)


def test_pickles_with_every_field():
    tp = pickle.loads(pickle.dumps(TopicPartition("t", 2, 7, "meta", 3)))
    assert (tp.topic, tp.partition, tp.offset, tp.metadata, tp.leader_epoch) == ("t", 2, 7, "meta", 3)
