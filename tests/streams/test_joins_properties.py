"""Random interleavings of both join inputs against small declarative models written here:
what a join must have produced, stated without its stores, windows or emission machinery."""
from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st

from streams import JoinWindows
from tests.streams.join_kit import TwoInputs, show

pytestmark = pytest.mark.unit

KEYS = st.sampled_from(["a", "b", "c"])
VALUES = st.sampled_from(["1", "2", "3", "4"])


# ---------------------------------------------------------------------- stream–stream
@st.composite
def bounded_disorder(draw, jitter: int = 6):
    """(side, key, value, ts) with timestamps at most ``jitter`` behind the largest so far."""
    events, base = [], 0
    for _ in range(draw(st.integers(1, 30))):
        base += draw(st.integers(0, 4))
        ts = max(0, base - draw(st.integers(0, jitter)))
        events.append((draw(st.sampled_from("LR")), draw(KEYS), draw(VALUES) + f"@{len(events)}", ts))
    return events


def expected_stream_stream(events, kind: str, before: int, after: int, grace: int = 6) -> Counter:
    """Every pair within the window joins once while the earlier record is still in its side's
    window store (Kafka's retention, before + after + grace: a record at or before that store's
    largest timestamp minus the retention is gone); an unmatched record of an outer side is emitted
    once with null — at arrival if its window had already closed by stream time (Kafka emits such
    a record at once), else if nothing matched it later."""
    retention = before + after + grace

    def window(e, o):          # does o (other side) fall in e's join window?
        lo, hi = (e[3] - before, e[3] + after) if e[0] == "L" else (e[3] - after, e[3] + before)
        return o[0] != e[0] and o[1] == e[1] and lo <= o[3] <= hi

    def kept(j, i):            # is events[j] still in its side's store when events[i] arrives?
        observed = max(x[3] for x in events[:i] if x[0] == events[j][0])
        return events[j][3] > observed - retention

    out = Counter()
    stream_time = -1
    outer_sides = {"inner": "", "left": "L", "outer": "LR"}[kind]
    for i, e in enumerate(events):
        stream_time = max(stream_time, e[3])
        earlier = [o for j, o in enumerate(events[:i]) if window(e, o) and kept(j, i)]
        for o in earlier:
            left, right = (e, o) if e[0] == "L" else (o, e)
            out[(e[1], show(left[2], right[2]), max(e[3], o[3]))] += 1
        if e[0] in outer_sides and not earlier:
            time_to = e[3] + (after if e[0] == "L" else before)
            later = [o for j, o in enumerate(events[i + 1:], i + 1) if window(e, o) and kept(i, j)]
            if time_to < stream_time or not later:
                pair = show(e[2], None) if e[0] == "L" else show(None, e[2])
                out[(e[1], pair, e[3])] += 1
    return out


@settings(max_examples=60, deadline=None)
@given(events=bounded_disorder(), kind=st.sampled_from(["inner", "left", "outer"]),
       before=st.integers(0, 5), after=st.integers(0, 5))
def test_stream_stream_joins_match_the_declarative_model(events, kind, before, after):
    windows = JoinWindows.ofTimeDifferenceAndGrace(0, 6).before(before).after(after)

    def build(b, left, right):
        return {"inner": left.join, "left": left.leftJoin, "outer": left.outerJoin}[kind](right, show, windows)
    t = TwoInputs(build)
    got = Counter()
    for side, key, value, ts in events:
        got.update(t.step(side, key, value, ts))
    got.update(r for r in t.step("L", "flush", "end", 10_000) if r[0] != "flush")
    assert got == expected_stream_stream(events, kind, before, after)


def test_a_record_gone_from_its_window_store_joins_nothing():
    """The other side's record is older than its store's retention (0 + 0 + 6) when the late one
    arrives: Kafka's window store no longer returns it."""
    events = [("L", "a", "1@0", 0), ("L", "a", "1@1", 2), ("L", "a", "1@2", 3), ("L", "a", "1@3", 3),
              ("L", "a", "1@4", 6), ("R", "a", "1@5", 0)]
    assert not expected_stream_stream(events, "inner", 0, 0)
    assert expected_stream_stream(events[:-2] + events[-1:], "inner", 0, 0)


# ---------------------------------------------------------------------- stream–table
@settings(max_examples=60, deadline=None)
@given(events=st.lists(st.tuples(st.sampled_from("LR"), KEYS, st.one_of(st.none(), VALUES),
                                 st.integers(0, 50)), max_size=30),
       left=st.booleans())
def test_stream_table_join_reads_the_table_as_it_is_when_the_stream_record_arrives(events, left):
    t = TwoInputs(lambda b, s, tb: (s.leftJoin if left else s.join)(tb, show), "stream", "table")
    table: dict = {}
    for side, key, value, ts in events:
        got = t.step(side, key, value, ts)
        if side == "R":
            assert got == []
            if value is None:
                table.pop(key, None)
            else:
                table[key] = value
            continue
        right = table.get(key)
        want = [] if value is None or (right is None and not left) else [(key, show(value, right), ts)]
        assert got == want


# ---------------------------------------------------------------------- table–table
def _sql_join(left: dict, right: dict, kind: str) -> dict:
    keys = {"inner": left.keys() & right.keys(), "left": left.keys(), "outer": left.keys() | right.keys()}[kind]
    return {k: show(left.get(k), right.get(k)) for k in keys}


@settings(max_examples=60, deadline=None)
@given(events=st.lists(st.tuples(st.sampled_from("LR"), KEYS, st.one_of(st.none(), VALUES),
                                 st.integers(0, 50)), max_size=30),
       kind=st.sampled_from(["inner", "left", "outer"]), partitions=st.sampled_from([1, 3]))
def test_table_table_join_result_is_always_the_join_of_the_current_tables(events, kind, partitions):
    def build(b, lt, rt):
        return {"inner": lt.join, "left": lt.leftJoin, "outer": lt.outerJoin}[kind](rt, show).toStream()
    t = TwoInputs(build, "table", "table", partitions={"left": partitions, "right": partitions})
    tables: dict = {"L": {}, "R": {}}
    result: dict = {}
    for side, key, value, ts in events:
        for k, v, _ in t.step(side, key, value, ts):
            if v is None:
                result.pop(k, None)
            else:
                result[k] = v
        if value is None:
            tables[side].pop(key, None)
        else:
            tables[side][key] = value
        assert result == _sql_join(tables["L"], tables["R"], kind)


# ---------------------------------------------------------------------- restore
def _restored(t: TwoInputs) -> None:
    """Replace every task by one rebuilt from its stores' entries encoded as changelog bytes."""
    from streams.interpreter import build_task
    from streams.state_codec import decode_key, decode_value, encode_key, encode_value
    from streams.stores import DictBacking
    interp = t.driver._interp
    for (sub_id, partition), (task, _) in list(interp.tasks.items()):
        logs = {name: task.store(name).backing for name in task.specs}
        logs["__meta"] = task.meta_backing

        def backing(name, logs=logs):
            fresh = DictBacking()
            for k, v in (logs[name].data.items() if name in logs else ()):
                fresh.put(decode_key(encode_key(k)), decode_value(encode_value(v)))
            return fresh
        sub = next(s for s in interp.topology.subtopologies if s.id == sub_id)
        interp.tasks[(sub_id, partition)] = build_task(interp.topology, sub, interp.app, partition, backing=backing,
                                                       defaults=interp.defaults)


@settings(max_examples=40, deadline=None)
@given(events=bounded_disorder(), kind=st.sampled_from(["left", "outer"]), cut=st.floats(0, 1))
def test_a_stream_join_restored_from_its_changelogs_continues_identically(events, kind, cut):
    windows = JoinWindows.ofTimeDifferenceAndGrace(3, 6)

    def build(b, left, right):
        return getattr(left, f"{kind}Join")(right, show, windows)
    whole, parted = TwoInputs(build), TwoInputs(build)
    split = int(cut * len(events))
    expected = [whole.step(*e[:2], e[2], e[3]) for e in events]
    got = [parted.step(*e[:2], e[2], e[3]) for e in events[:split]]
    _restored(parted)
    got += [parted.step(*e[:2], e[2], e[3]) for e in events[split:]]
    assert got == expected
