"""Foreign-key table joins (KIP-213): retraction on a changed foreign key, fan-out of a right
update, deletes on both sides, stale responses (a foreign key flipping A→B→A before the answers
come back), null foreign keys, and the result against the join of the current tables under
random histories."""
from __future__ import annotations

import random

import pytest
from hypothesis import example, given, settings, strategies as st

from streams import Consumed, Produced, Serdes, StreamsBuilder, TableJoined
from streams.interpreter import Interpreter
from tests.streams.any_order import run_in_any_order
from tests.streams.join_kit import show

pytestmark = pytest.mark.unit
S = Serdes.String()


def fk_of(value: str | None):
    """Left values are "<foreign key>:<payload>"; an empty foreign key is null."""
    return value.split(":")[0] or None


class FkJoin:
    def __init__(self, kind: str = "inner", partitions=None, named=None, cache_bytes: int = 0, right_filter=None):
        b = StreamsBuilder()
        left = b.table("left", Consumed.with_(S, S))
        right = b.table("right", Consumed.with_(S, S))
        if right_filter is not None:
            right = right.filter(right_filter)
        join = left.join if kind == "inner" else left.leftJoin
        args = (right, fk_of, show) + ((TableJoined.as_(named),) if named else ())
        join(*args).toStream().to("out", Produced.with_(S, S))
        self.topology = b.build()
        self.interp = Interpreter(self.topology, {"application.id": "fk"}, partitions, cache_bytes=cache_bytes)
        self.read = 0

    def append(self, side: str, key: str, value: str | None, ts: int) -> None:
        self.interp.append("left" if side == "L" else "right", S.serialize(key), S.serialize(value), ts)

    def out(self) -> list[tuple]:
        recs = self.interp.topics.get("out", [[]])
        flat = [r for p in recs for r in p]
        new, self.read = flat[self.read:], len(flat)
        return [(S.deserialize(k), S.deserialize(v), ts) for k, v, ts, _ in new]

    def step(self, side, key, value, ts) -> list[tuple]:
        self.append(side, key, value, ts)
        self.interp.run()
        return self.out()

    def process_next(self, topic: str, partition: int | None = None) -> None:
        """Process the first record waiting on ``topic`` (``"registration"``, ``"response"``: the
        internal topics), of ``partition`` if given, only: an order the tasks' threads may take."""
        if topic in ("registration", "response"):
            topic = next(t for t in self.interp.readers if f"SUBSCRIPTION-{topic.upper()}" in t)
        pending = self.interp.pending
        entry = next(e for e in pending if e[0] == topic and partition in (None, e[1]))
        pending.remove(entry)
        self.interp.process(*entry)

    def finish(self) -> dict:
        """Commit and process until nothing waits; the last result per key."""
        self.interp.commit()
        while self.interp.pending:
            self.interp.run()
            self.interp.commit()
        result: dict = {}
        for k, v, _ in self.out():
            put(result, k, v)
        return result


def test_inner_join_fk_change_retracts_and_right_update_fans_out():
    j = FkJoin()
    assert j.step("L", "l1", "A:1", 1) == [("l1", None, 1)]     # no right row A yet: a tombstone (Kafka: nothing)
    assert j.step("R", "A", "apple", 2) == [("l1", "A:1 - apple", 2)]
    assert j.step("L", "l2", "A:2", 3) == [("l2", "A:2 - apple", 3)]
    assert j.step("R", "A", "apricot", 4) == [("l1", "A:1 - apricot", 4), ("l2", "A:2 - apricot", 4)]
    assert j.step("L", "l1", "B:1", 5) == [("l1", None, 5)]      # B absent: the old result is retracted
    assert j.step("R", "A", "avocado", 6) == [("l2", "A:2 - avocado", 6)]   # l1 no longer subscribes to A
    assert j.step("R", "B", "banana", 7) == [("l1", "B:1 - banana", 7)]
    assert j.step("L", "l2", None, 8) == [("l2", None, 8)]      # left delete
    assert j.step("R", "B", None, 9) == [("l1", None, 9)]       # right delete
    assert j.step("R", "A", "acerola", 10) == []                 # nobody subscribes to A any more


def test_left_join_keeps_rows_without_a_match_and_null_foreign_keys():
    j = FkJoin("left")
    assert j.step("L", "l1", "A:1", 1) == [("l1", "A:1 - null", 1)]
    assert j.step("R", "A", "apple", 2) == [("l1", "A:1 - apple", 2)]
    assert j.step("R", "A", None, 3) == [("l1", "A:1 - null", 3)]
    assert j.step("L", "l2", ":2", 4) == [("l2", ":2 - null", 4)]      # a null foreign key joins nothing
    # a left join unsubscribes from A without an answer and subscribes the deleted row's null key
    # (PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE): one tombstone (KAFKA-16394 gave two)
    assert j.step("L", "l1", None, 5) == [("l1", None, 5)]


def test_inner_join_skips_a_row_whose_foreign_key_is_null():
    j = FkJoin()
    j.step("R", "A", "apple", 1)
    assert j.step("L", "l1", ":x", 2) == [("l1", None, 2)]     # a tombstone where Kafka emits nothing


def test_stale_responses_of_a_flipping_foreign_key_are_discarded():
    """A→B→A before any answer returns: only the answer for the current value is joined."""
    j = FkJoin(partitions={"left": 2, "right": 3})
    j.step("R", "A", "apple", 1)
    j.step("R", "B", "banana", 2)
    for i, fk in enumerate(["A", "B", "A"]):
        j.append("L", "l1", f"{fk}:v{i}", 10 + i)
    j.interp.run()
    assert j.out() == [("l1", "A:v2 - apple", 12)]


def test_fan_out_reaches_subscribers_in_every_partition():
    j = FkJoin(partitions={"left": 4, "right": 2})
    for i in range(8):
        j.step("L", f"l{i}", f"A:{i}", i)
    got = j.step("R", "A", "apple", 20)
    assert sorted(k for k, _, _ in got) == [f"l{i}" for i in range(8)]
    assert {v for _, v, _ in got} == {f"A:{i} - apple" for i in range(8)}


def test_a_subscription_is_not_answered_with_a_right_row_still_in_the_record_cache():
    """Right ``B`` put and deleted between two commits is never forwarded (the flush drops a key
    absent before and after), so the fan-out cannot retract an answer given with the cached row:
    the subscription arriving in between is answered with the row as last forwarded (none)."""
    j = FkJoin(cache_bytes=10_485_760)
    j.append("R", "B", "bx", 0)
    j.append("R", "B", None, 1)
    j.append("L", "l1", "B:x", 2)
    j.process_next("left")
    j.interp.commit()                       # the left row's change is forwarded: its subscription is written
    j.process_next("right")                 # B = bx waits in the right task's cache
    j.process_next("registration")          # the subscription for B is answered
    j.process_next("right")                 # B deleted before the commit: nothing is forwarded
    assert j.finish() == {}


def test_a_subscription_answer_follows_a_filtered_right_table_as_forwarded():
    """The same through a filter: ``B`` put passing it, then changed to a value that fails it, is
    flushed as a change the filter drops (absent before, filtered out after)."""
    j = FkJoin(cache_bytes=10_485_760, right_filter=lambda k, v: not v.endswith("z"))
    j.append("R", "B", "bx", 0)
    j.append("R", "B", "bz", 1)
    j.append("L", "l1", "B:x", 2)
    j.process_next("left")
    j.interp.commit()
    j.process_next("right")
    j.process_next("registration")
    j.process_next("right")
    assert j.finish() == {}
    j.step("R", "B", "by", 3)
    assert j.finish() == {"l1": "B:x - by"}     # what waits is answered at the flush, through the fan-out


def test_a_late_answer_is_not_joined_with_a_left_row_still_in_the_record_cache():
    """``l1`` subscribes to ``B``, moves to ``D`` and is deleted (both answered by ``D``'s
    partition first), then set to its first value again and deleted again between two commits,
    which forwards nothing. ``B``'s late answer to the first subscription matches the waiting
    value, not the forwarded one (none)."""
    j = FkJoin(cache_bytes=10_485_760, partitions={"left": 1, "right": 3})   # B: partition 1, D: 0
    j.step("R", "B", "bx", 0)
    j.step("R", "D", "dy", 0)
    j.interp.commit()
    j.step("L", "l1", "B:x", 1)
    j.interp.commit()                        # subscription for B (partition 1), not processed yet
    j.append("L", "l1", "D:y", 2)
    j.process_next("left")
    j.interp.commit()                        # unsubscribes from B (after it), subscribes to D
    j.append("L", "l1", None, 3)
    j.process_next("left")
    j.interp.commit()                        # the delete, answered by D
    for _ in range(2):
        j.process_next("registration", 0)
        j.process_next("response")           # l1 joined with D, then a tombstone
    j.append("L", "l1", "B:x", 4)
    j.process_next("left")                   # waits in the left task's cache
    j.process_next("registration", 1)        # B answers the first subscription
    j.process_next("response")
    j.append("L", "l1", None, 5)
    j.process_next("left")                   # absent at the last commit and now: never forwarded
    assert j.finish() == {}


def test_internal_topics_are_named_as_kafka_names_them():
    j = FkJoin()
    j.step("R", "A", "apple", 0)
    j.step("L", "l1", "A:1", 1)
    topics = set(j.interp.topics)
    assert "fk-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic" in topics
    assert "fk-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic" in topics
    named = FkJoin(named="lines")
    named.step("L", "l1", "A:1", 1)
    assert "fk-lines-subscription-registration-topic" in named.interp.topics
    assert "lines-subscription-store" in named.topology.stores()


def test_subscription_and_response_topics_are_copartitioned_with_their_tables():
    j = FkJoin(partitions={"left": 2, "right": 5})
    assert j.interp.partitions("fk-KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic") == 5
    assert j.interp.partitions("fk-KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic") == 2


def put(table: dict, key, value) -> None:
    """A table's row set, or deleted by a null value."""
    (table.__setitem__(key, value) if value is not None else table.pop(key, None))


class Tables:
    """Random events turned into left and right rows, appended to a join and kept as the current
    tables: the oracle is the join of what they hold at the end."""

    def __init__(self, join: FkJoin):
        self.j, self.left, self.right = join, {}, {}

    def append(self, i: int, side: str, key: str, fk: str | None, payload: str) -> None:
        if side == "L":
            key, value = key.replace("k", "l"), None if fk is None and payload == "y" else f"{fk or ''}:{payload}"
            put(self.left, key, value)
        else:
            key, value = fk or "A", None if payload == "y" and i % 2 else f"{(fk or 'A').lower()}{payload}"
            put(self.right, key, value)
        self.j.append(side, key, value, i)

    def joined(self, kind: str) -> dict:
        return {pk: show(lv, self.right.get(fk_of(lv))) for pk, lv in self.left.items()
                if kind == "left" or fk_of(lv) in self.right}


@settings(max_examples=60, deadline=None)
@given(events=st.lists(st.tuples(st.sampled_from("LR"), st.sampled_from(["k1", "k2", "k3"]),
                                 st.one_of(st.none(), st.sampled_from(["A", "B", "C"])),
                                 st.sampled_from(["x", "y"])), max_size=25),
       kind=st.sampled_from(["inner", "left"]), batch=st.integers(1, 4))
def test_fk_join_result_converges_to_the_join_of_the_current_tables(events, kind, batch):
    """Appended ``batch`` at a time before processing, so answers race later updates."""
    j = FkJoin(kind, partitions={"left": 2, "right": 3})
    tables, result = Tables(j), {}
    for i, event in enumerate(events):
        tables.append(i, *event)
        if i % batch == 0:
            j.interp.run()
            for k, v, _ in j.out():
                put(result, k, v)
    j.interp.run()
    for k, v, _ in j.out():
        put(result, k, v)
    assert result == tables.joined(kind)


@settings(max_examples=300, deadline=None)
@given(events=st.lists(st.tuples(st.sampled_from("LR"), st.sampled_from(["k1", "k2"]),
                                 st.one_of(st.none(), st.sampled_from(["A", "B", "C"])),
                                 st.sampled_from(["x", "y"])), max_size=20),
       kind=st.sampled_from(["inner", "left"]), seed=st.integers(0, 2**32 - 1),
       cache=st.sampled_from([(0, 0.0), (10_485_760, 0.2), (200, 0.1)]))
@example(events=[("R", "k1", "B", "x"), ("R", "k1", "B", "y"), ("L", "k1", "B", "x")], kind="inner",
         seed=1_958_877_729, cache=(10_485_760, 0.2))     # a right row put and deleted between commits
def test_fk_join_result_converges_in_any_processing_order(events, kind, seed, cache):
    """Subscriptions and answers race each other across tasks (Spark runs a query's tasks at once,
    Kafka its stream threads): whatever order the partitions are processed in, the last result per
    key is the join of the current tables. A changed foreign key used to be answered by the old key
    too (with a null), which could arrive last. With record caches (tables forwarding each key's
    latest change at commits or evictions), the same."""
    j = FkJoin(kind, partitions={"left": 2, "right": 3}, cache_bytes=cache[0])
    tables, result = Tables(j), {}
    for i, event in enumerate(events):
        tables.append(i, *event)
    run_in_any_order(j.interp, random.Random(seed), commit_chance=cache[1])
    for k, v, _ in j.out():
        put(result, k, v)
    assert result == tables.joined(kind)
