"""Unkeyed records' sticky partition skips partitions without a leader, as Kafka's
``BuiltInPartitioner`` and librdkafka's random partitioner do; keyed and explicit ones keep theirs."""
import numpy as np
import pytest

from broker.client.producer_batch import StickyPartitioner, assign_partitions, record_sizes
from broker.records.arrow_body import record_batch

pytestmark = pytest.mark.unit


def _unkeyed(n: int, value_size: int = 100):
    return record_batch([None] * n, [b"v" * value_size] * n, [1] * n)


def test_unkeyed_batches_go_only_to_partitions_with_a_leader():
    sticky = StickyPartitioner()
    seen = set()
    for _ in range(200):
        batch = _unkeyed(10)
        parts = assign_partitions(batch, np.full(10, -1, np.int32), 6, "t", sticky, 300, available=[1, 4])
        seen |= set(parts.tolist())
    assert seen == {1, 4}


def test_a_sticky_partition_that_loses_its_leader_is_left_for_one_that_has_one():
    sticky = StickyPartitioner({"t": 3})
    assert sticky.runs("t", 6, 1, available=[0, 1, 2, 3, 4, 5]).tolist() == [3]
    assert sticky.runs("t", 6, 1, available=[0, 5]).tolist()[0] in (0, 5)
    assert sticky.runs("t", 6, 3, available=[0, 5]).tolist() in ([0, 5, 0], [5, 0, 5])


def test_with_no_partition_available_every_partition_is_a_candidate():
    sticky = StickyPartitioner()
    seen = {int(p) for _ in range(300) for p in sticky.runs("t", 3, 2, available=[])}
    assert seen == {0, 1, 2}


def test_keyed_and_explicit_records_keep_their_partition_whatever_is_available():
    batch = record_batch([b"a", None, b"c"], [b"1", b"2", b"3"], [1, 1, 1])
    parts = assign_partitions(batch, np.array([-1, 5, -1], np.int32), 6, "t", StickyPartitioner(), 1 << 20,
                              sizes=record_sizes(batch), available=[0])
    from broker.client.partitioner import partition_for_key
    assert parts.tolist() == [partition_for_key(b"a", 6), 5, partition_for_key(b"c", 6)]


def test_without_availability_the_runs_walk_every_partition_in_turn_as_before():
    sticky = StickyPartitioner({"t": 4})
    assert sticky.runs("t", 6, 4).tolist() == [4, 5, 0, 1]
    assert sticky.runs("t", 6, 1).tolist() == [2]
