"""librdkafka's rules for assign/incremental_assign/incremental_unassign (broker/client/assignment.py)."""
from __future__ import annotations

import pytest

from broker.client import OFFSET_BEGINNING, OFFSET_END, OFFSET_INVALID, OFFSET_STORED, KafkaError, KafkaException
from broker.client import TopicPartition as TP
from broker.client.assignment import COOPERATIVE, EAGER, check_add, check_method, check_remove, rebalance_protocol

pytestmark = pytest.mark.unit


def _error(call, *args) -> KafkaError:
    with pytest.raises(KafkaException) as e:
        call(*args)
    return e.value.args[0]


@pytest.mark.parametrize("strategy, protocol", [("cooperative-sticky", COOPERATIVE), ("Cooperative-Sticky", COOPERATIVE),
                                                ("cooperative-sticky,range", COOPERATIVE), ("range", EAGER),
                                                ("roundrobin", EAGER), ("range,roundrobin", EAGER)])
def test_the_protocol_is_the_first_assignor_s(strategy, protocol):
    assert rebalance_protocol(strategy) == protocol


def test_each_protocol_refuses_the_other_s_calls_with_state():
    check_method(None, True), check_method(None, False), check_method(COOPERATIVE, True), check_method(EAGER, False)
    err = _error(check_method, COOPERATIVE, False, "Failed to set assignment")
    assert err.code() == KafkaError._STATE and err.str() == (
        "Failed to set assignment: Changes to the current assignment must be made using incremental_assign() or "
        "incremental_unassign() when rebalance protocol type is COOPERATIVE")
    err = _error(check_method, EAGER, True)
    assert err.code() == KafkaError._STATE and err.str() == (
        "Changes to the current assignment must be made using assign() when rebalance protocol type is EAGER")


def test_adding_an_assigned_partition_conflicts_and_a_duplicate_is_an_invalid_argument():
    err = _error(check_add, {("t", 0)}, [TP("t", 1), TP("t", 0)])
    assert err.code() == KafkaError._CONFLICT and err.str() == "t [0] is already part of the current assignment"
    err = _error(check_add, set(), [TP("t", 1, 5), TP("t", 1, 7)])
    assert err.code() == KafkaError._INVALID_ARG and err.str() == "Duplicate t [1] in input list"
    check_add({("t", 0)}, [TP("t", 1), TP("u", 0)])


@pytest.mark.parametrize("offset", [OFFSET_BEGINNING, OFFSET_END, OFFSET_STORED, OFFSET_INVALID, 0, 42, -2001])
def test_absolute_and_logical_start_offsets_are_accepted(offset):
    check_add(set(), [TP("t", 0, offset)])


@pytest.mark.parametrize("offset", [-3, -999, -1002, -1999])
def test_other_negative_start_offsets_are_invalid(offset):
    err = _error(check_add, set(), [TP("t", 0, offset)])
    assert err.code() == KafkaError._INVALID_ARG and err.str() == f"t [0] has invalid start offset {offset}"


def test_removing_what_is_not_assigned_is_an_invalid_argument():
    err = _error(check_remove, set(), [TP("t", 0)])
    assert err.code() == KafkaError._INVALID_ARG and err.str() == "Can't subtract from empty assignment"
    err = _error(check_remove, {("t", 0)}, [TP("t", 0), TP("t", 3)])
    assert err.code() == KafkaError._INVALID_ARG
    assert err.str() == "t [3] can't be unassigned since it is not in the current assignment"
    check_remove(set(), []), check_remove({("t", 0), ("t", 1)}, [TP("t", 1)])
