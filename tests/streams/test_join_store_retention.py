"""A stream–stream join's window stores drop records by the store's stream time across keys, as
Kafka's segmented window store drops whole segments: a key never seen again does not stay in the
store (nor in its compacted changelog) for ever."""
from __future__ import annotations

import pytest

from streams import JoinWindows
from tests.streams.join_kit import TwoInputs, show

pytestmark = pytest.mark.unit


def _inner():
    return TwoInputs(lambda b, left, right: left.join(right, show, JoinWindows.ofTimeDifferenceWithNoGrace(10)))


def _left_keys(t) -> set:
    name = next(n for n in t.topology.stores() if "JOINTHIS" in n)     # the left side's window store
    return {w.key for w, _ in t.driver.getWindowStore(name).all()}


def test_a_key_never_seen_again_leaves_the_store_once_stream_time_passes_its_retention():
    t = _inner()
    for i in range(5):
        t.step("L", f"gone-{i}", "A", i)
    assert _left_keys(t) == {f"gone-{i}" for i in range(5)}
    t.step("L", "other", "X", 100)        # the left store's stream time 100: retention 20 passed them
    assert _left_keys(t) == {"other"}


def test_records_within_retention_of_other_keys_stay_and_still_join():
    t = _inner()
    t.step("L", "k", "A", 90)
    t.step("L", "other", "X", 100)        # 90 > 100 - 20: k's record is kept
    assert _left_keys(t) == {"k", "other"}
    assert t.values("R", "k", "a", 95) == ["A - a"]
