"""Table–table joins on the primary key under Kafka's record cache (``statestore.cache.max.bytes``):
whatever order a task takes its two inputs in, and wherever commits and evictions fall, the last
result per key is the join of the current tables."""
from __future__ import annotations

import random

import pytest
from hypothesis import example, given, settings, strategies as st

from streams import Consumed, Produced, Serdes, StreamsBuilder
from streams.interpreter import Interpreter
from tests.streams.any_order import run_in_any_order
from tests.streams.join_kit import show
from tests.streams.test_joins_foreign_key import put

pytestmark = pytest.mark.unit
S = Serdes.String()


def passes(key, value) -> bool:
    """The right side's filter, when the join reads a filtered table: values ending in "z" fail."""
    return not value.endswith("z")


class TableTableJoin:
    def __init__(self, kind: str, right_filter: bool = False, cache_bytes: int = 0):
        b = StreamsBuilder()
        left = b.table("left", Consumed.with_(S, S))
        right = b.table("right", Consumed.with_(S, S))
        if right_filter:
            right = right.filter(passes)
        join = {"inner": left.join, "left": left.leftJoin, "outer": left.outerJoin}[kind]
        join(right, show).toStream().to("out", Produced.with_(S, S))
        self.kind, self.right_filter = kind, right_filter
        self.interp = Interpreter(b.build(), {"application.id": "tt"}, {"left": 2, "right": 2},
                                  cache_bytes=cache_bytes)
        self.left: dict = {}
        self.right: dict = {}

    def append(self, side: str, key: str, value: str | None, ts: int) -> None:
        put(self.left if side == "L" else self.right, key, value)
        self.interp.append("left" if side == "L" else "right", S.serialize(key), S.serialize(value), ts)

    def result(self) -> dict:
        got: dict = {}
        for part in self.interp.topics.get("out", []):
            for k, v, _, _ in part:
                put(got, S.deserialize(k), S.deserialize(v))
        return got

    def joined(self) -> dict:
        right = {k: v for k, v in self.right.items() if not self.right_filter or passes(k, v)}
        keys = {"inner": self.left.keys() & right.keys(), "left": self.left.keys(),
                "outer": self.left.keys() | right.keys()}[self.kind]
        return {k: show(self.left.get(k), right.get(k)) for k in keys}


@settings(max_examples=200, deadline=None)
@given(events=st.lists(st.tuples(st.sampled_from("LR"), st.sampled_from(["k1", "k2", "k3"]),
                                 st.one_of(st.none(), st.sampled_from(["x", "y", "z"]))), max_size=20),
       kind=st.sampled_from(["inner", "left", "outer"]), right_filter=st.booleans(),
       seed=st.integers(0, 2**32 - 1), cache=st.sampled_from([(0, 0.0), (10_485_760, 0.2), (200, 0.1), (400, 0.0)]))
@example(events=[("L", "k1", None), ("L", "k1", None), ("L", "k2", "x"), ("R", "k2", "x"), ("L", "k2", None),
                 ("L", "k3", None), ("R", "k1", None), ("R", "k3", None)], kind="inner", right_filter=False,
         seed=1, cache=(400, 0.0))     # left k2 put and deleted between evictions, joined by right k2
def test_table_table_join_result_converges_in_any_processing_order(events, kind, right_filter, seed, cache):
    """Either side's change, forwarded at a commit or an eviction, joins the other side's row;
    a key of one side put and deleted between two flushes forwards nothing, so the join must not
    have shown it. The last result per key is the join of the tables as they end."""
    j = TableTableJoin(kind, right_filter, cache_bytes=cache[0])
    for i, (side, key, value) in enumerate(events):
        j.append(side, key, None if value is None else f"{side.lower()}{value}", i)
    run_in_any_order(j.interp, random.Random(seed), commit_chance=cache[1])
    assert j.result() == j.joined()


@pytest.mark.parametrize("kind", ["inner", "left", "outer"])
def test_a_row_put_and_deleted_between_flushes_is_not_joined(kind):
    """Right ``k`` put waits in the cache; left ``k``, evicted from a full cache at once, is
    forwarded and joins the right row as forwarded (none), not the waiting one: the right row is
    deleted before the commit, a key absent before and after, so its delete is never forwarded
    and a result joined with it could never be retracted."""
    j = TableTableJoin(kind, cache_bytes=200)      # room for one entry: the second evicts the first
    j.append("R", "k", "rx", 0)
    j.append("L", "k", "lx", 1)
    j.append("R", "k", None, 2)
    j.interp.run()
    j.interp.commit()
    assert j.result() == j.joined() == ({} if kind == "inner" else {"k": "lx - null"})


def joined(kind: str, left: dict, right: dict) -> dict:
    """The DSL join ``kind`` of two row sets, on the key."""
    keys = {"join": left.keys() & right.keys(), "leftJoin": left.keys(), "outerJoin": left.keys() | right.keys()}[kind]
    return {k: show(left.get(k), right.get(k)) for k in keys}


@settings(max_examples=100, deadline=None)
@given(events=st.lists(st.tuples(st.sampled_from("ABC"), st.sampled_from(["k1", "k2"]),
                                 st.one_of(st.none(), st.sampled_from(["x", "y"]))), max_size=20),
       kinds=st.tuples(*[st.sampled_from(["join", "leftJoin", "outerJoin"])] * 2),
       seed=st.integers(0, 2**32 - 1), cache=st.sampled_from([(0, 0.0), (10_485_760, 0.2), (200, 0.1), (600, 0.05)]))
@example(events=[("A", "k1", "x"), ("A", "k1", None), ("C", "k1", "x")], kinds=("leftJoin", "join"),
         seed=26, cache=(200, 0.1))     # A put and deleted between flushes, read through the first join
def test_a_chain_of_table_table_joins_converges_in_any_processing_order(events, kinds, seed, cache):
    """``A ⋈ B ⋈ C`` with the first join unmaterialized: ``C``'s change reads the first join's
    result through both its sides' getters, which must read them as forwarded too."""
    b = StreamsBuilder()
    t = {n: b.table(n, Consumed.with_(S, S)) for n in "ABC"}
    ab = getattr(t["A"], kinds[0])(t["B"], show)
    getattr(ab, kinds[1])(t["C"], show).toStream().to("out", Produced.with_(S, S))
    interp = Interpreter(b.build(), {"application.id": "chain"}, {n: 2 for n in "ABC"}, cache_bytes=cache[0])
    tables: dict = {n: {} for n in "ABC"}
    for i, (name, key, value) in enumerate(events):
        value = None if value is None else f"{name.lower()}{value}"
        put(tables[name], key, value)
        interp.append(name, S.serialize(key), S.serialize(value), i)
    run_in_any_order(interp, random.Random(seed), commit_chance=cache[1])
    got: dict = {}
    for part in interp.topics.get("out", []):
        for k, v, _, _ in part:
            put(got, S.deserialize(k), S.deserialize(v))
    assert got == joined(kinds[1], joined(kinds[0], tables["A"], tables["B"]), tables["C"])
