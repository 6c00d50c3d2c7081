"""Leader election and ISR upkeep on broker loss, against Kafka's rules and a brute-force oracle."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.replication.election import elect_leader, isr_after_broker_loss, preferred_leader

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("replicas, isr, live, expected", [
    ([1, 2, 3], [1, 2, 3], {1, 2, 3}, 1),
    ([3, 1, 2], [1, 2], {1, 2, 3}, 1),      # assignment order, not ISR order, and 3 is out of sync
    ([3, 1, 2], [2, 1], {1, 2, 3}, 1),
    ([1, 2, 3], [1, 2], {2, 3}, 2),
    ([1, 2, 3], [1], {2, 3}, None),         # the only in-sync replica is down: offline
    ([1, 2, 3], [1, 2, 3], set(), None),
    ([], [], {1}, None),
])
def test_clean_election_takes_the_first_live_isr_member(replicas, isr, live, expected):
    assert elect_leader(replicas, isr, live) == expected


def test_unclean_election_falls_back_to_any_live_replica_in_assignment_order():
    assert elect_leader([1, 2, 3], [1], {3, 2}, unclean=True) == 2
    assert elect_leader([1, 2, 3], [1, 3], {1, 2, 3}, unclean=True) == 1   # clean when it can be
    assert elect_leader([1, 2, 3], [1], set(), unclean=True) is None


def test_preferred_leader_is_the_first_assigned_replica():
    assert preferred_leader([3, 1, 2]) == 3
    assert preferred_leader([]) is None


@pytest.mark.parametrize("isr, broker, expected", [
    ([1, 2, 3], 2, [1, 3]),
    ([1, 2, 3], 4, [1, 2, 3]),
    ([2, 3], 3, [2]),
    ([2], 2, [2]),                           # the last member stays: offline, not unclean
])
def test_isr_after_broker_loss_is_never_empty(isr, broker, expected):
    assert isr_after_broker_loss(isr, broker) == expected


brokers = st.integers(1, 6)


@settings(max_examples=300, deadline=None, database=None)
@given(st.lists(brokers, unique=True, max_size=5), st.sets(brokers), st.sets(brokers), st.booleans())
def test_election_matches_a_brute_force_oracle(replicas, isr_set, live, unclean):
    isr = [r for r in replicas if r in isr_set]
    leader = elect_leader(replicas, isr, live, unclean)
    clean = [r for r in replicas if r in isr and r in live]
    anyone = [r for r in replicas if r in live]
    expected = clean[0] if clean else (anyone[0] if unclean and anyone else None)
    assert leader == expected


@settings(max_examples=200, deadline=None, database=None)
@given(st.lists(brokers, unique=True, min_size=1, max_size=5), st.lists(brokers, max_size=8))
def test_losing_brokers_one_by_one_keeps_an_isr_member(isr, losses):
    for broker in losses:
        before = isr
        isr = isr_after_broker_loss(isr, broker)
        assert isr and set(isr) <= set(before)
        assert broker not in isr or before == [broker]
