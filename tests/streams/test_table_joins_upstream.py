"""Kafka's own table–table join tests, ported: ``KTableKTableInnerJoinTest``,
``KTableKTableLeftJoinTest``, ``KTableKTableOuterJoinTest`` (the output topic, and the ``Change``
the join's table forwards with and without old values) and ``TableTableJoinIntegrationTest``
(plain, versioned and mixed tables, with and without the record cache, and chains of two joins) —
the same inputs, the same results in the same order, with the same timestamps."""
from __future__ import annotations

import pytest

from streams import Consumed, Materialized, Produced, Serdes, StreamsBuilder
from streams.record import Change
from streams.table_join import TableJoinMerger, TableTableJoin, ValueGetter
from streams.testing import TopologyTestDriver
from streams.versioned import Stores
from tests.streams.table_kit import Pipeline

pytestmark = pytest.mark.unit
S, I, L = Serdes.String(), Serdes.Integer(), Serdes.Long()


def _s(v) -> str:
    return "null" if v is None else v


def tostring_joiner(v1, v2) -> str:
    """MockValueJoiner.TOSTRING_JOINER: Java's string concatenation writes null as "null"."""
    return f"{_s(v1)}+{_s(v2)}"


@pytest.fixture
def changes(monkeypatch):
    """What every join's table forwards downstream, as (key, new, old, timestamp): Kafka's tests
    hang a MockApiProcessor under the join (``addProcessor("proc", supplier, joined.name)``)."""
    seen: list = []
    forward = TableJoinMerger.forward

    def capture(self, record):
        seen.append((record.key, record.value.new, record.value.old, record.timestamp))
        forward(self, record)
    monkeypatch.setattr(TableJoinMerger, "forward", capture)
    return seen


# ---------------------------------------------------------------------- KTableKTable*JoinTest
# the phases of the unit tests: (topic, [(key, value, timestamp)])
PHASES = [
    ("topic1", [(0, "X0", 5), (1, "X1", 6), (None, "SomeVal", 42)]),      # a null key is discarded
    ("topic2", [(0, "Y0", 0), (1, "Y1", 10), (None, "AnotherVal", 73)]),
    ("topic1", [(k, f"XX{k}", 7) for k in range(4)]),
    ("topic2", [(k, f"YY{k}", k * 5) for k in range(4)]),
    ("topic1", [(k, f"XXX{k}", 6) for k in range(4)]),
    ("topic2", [(0, None, 5), (1, None, 7)]),
    ("topic1", [(k, f"XXXX{k}", 13) for k in range(4)]),
    ("topic1", [(0, None, 0), (1, None, 42), (2, None, 5), (3, None, 20)]),
]

# per phase: (key, new, old, timestamp) with old values sent
WITH_OLD = {
    "inner": [
        [],
        [(0, "X0+Y0", None, 5), (1, "X1+Y1", None, 10)],
        [(0, "XX0+Y0", "X0+Y0", 7), (1, "XX1+Y1", "X1+Y1", 10)],
        [(0, "XX0+YY0", "XX0+Y0", 7), (1, "XX1+YY1", "XX1+Y1", 7), (2, "XX2+YY2", None, 10), (3, "XX3+YY3", None, 15)],
        [(0, "XXX0+YY0", "XX0+YY0", 6), (1, "XXX1+YY1", "XX1+YY1", 6), (2, "XXX2+YY2", "XX2+YY2", 10),
         (3, "XXX3+YY3", "XX3+YY3", 15)],
        [(0, None, "XXX0+YY0", 6), (1, None, "XXX1+YY1", 7)],
        [(2, "XXXX2+YY2", "XXX2+YY2", 13), (3, "XXXX3+YY3", "XXX3+YY3", 15)],
        [(2, None, "XXXX2+YY2", 10), (3, None, "XXXX3+YY3", 20)],
    ],
    "left": [
        [(0, "X0+null", None, 5), (1, "X1+null", None, 6)],
        [(0, "X0+Y0", "X0+null", 5), (1, "X1+Y1", "X1+null", 10)],
        [(0, "XX0+Y0", "X0+Y0", 7), (1, "XX1+Y1", "X1+Y1", 10), (2, "XX2+null", None, 7), (3, "XX3+null", None, 7)],
        [(0, "XX0+YY0", "XX0+Y0", 7), (1, "XX1+YY1", "XX1+Y1", 7), (2, "XX2+YY2", "XX2+null", 10),
         (3, "XX3+YY3", "XX3+null", 15)],
        [(0, "XXX0+YY0", "XX0+YY0", 6), (1, "XXX1+YY1", "XX1+YY1", 6), (2, "XXX2+YY2", "XX2+YY2", 10),
         (3, "XXX3+YY3", "XX3+YY3", 15)],
        [(0, "XXX0+null", "XXX0+YY0", 6), (1, "XXX1+null", "XXX1+YY1", 7)],
        [(0, "XXXX0+null", "XXX0+null", 13), (1, "XXXX1+null", "XXX1+null", 13), (2, "XXXX2+YY2", "XXX2+YY2", 13),
         (3, "XXXX3+YY3", "XXX3+YY3", 15)],
        [(0, None, "XXXX0+null", 0), (1, None, "XXXX1+null", 42), (2, None, "XXXX2+YY2", 10),
         (3, None, "XXXX3+YY3", 20)],
    ],
}
# the outer join differs from the left join only where the left side is deleted under a right row
WITH_OLD["outer"] = WITH_OLD["left"][:-1] + [[
    (0, None, "XXXX0+null", 0), (1, None, "XXXX1+null", 42), (2, "null+YY2", "XXXX2+YY2", 10),
    (3, "null+YY3", "XXXX3+YY3", 20)]]


def _unit_join(kind: str, materialized: bool = False):
    b = StreamsBuilder()
    table1 = b.table("topic1", Consumed.with_(I, S))
    table2 = b.table("topic2", Consumed.with_(I, S))
    join = {"inner": table1.join, "left": table1.leftJoin, "outer": table1.outerJoin}[kind]
    joined = join(table2, tostring_joiner, *([Materialized.with_(I, S)] if materialized else []))
    joined.toStream().to("output", Produced.with_(I, S))
    return b, joined


def _pipe_phases(b):
    d = TopologyTestDriver(b.build(), {"application.id": "tt-unit"})
    inputs = {t: d.createInputTopic(t, I, S) for t in ("topic1", "topic2")}
    out = d.createOutputTopic("output", I, S)
    for topic, rows in PHASES:
        for key, value, ts in rows:
            inputs[topic].pipeInput(key, value, ts)
        yield [(r.key, r.value, r.timestamp) for r in out.readRecordsToList()]


@pytest.mark.parametrize("materialized", [False, True], ids=["testJoin", "testQueryableJoin"])
@pytest.mark.parametrize("kind", ["inner", "left", "outer"])
def test_join_output_topic(kind, materialized):
    b, _ = _unit_join(kind, materialized)
    for got, expected in zip(_pipe_phases(b), WITH_OLD[kind]):
        assert got == [(k, new, ts) for k, new, _, ts in expected]


@pytest.mark.parametrize("kind", ["inner", "left", "outer"])
def test_not_sending_old_values(kind, changes):
    b, _ = _unit_join(kind)
    for phase, (_, expected) in enumerate(zip(_pipe_phases(b), WITH_OLD[kind])):
        assert changes == [(k, new, None, ts) for k, new, _, ts in expected], f"phase {phase}"
        changes.clear()


@pytest.mark.parametrize("kind", ["inner", "left", "outer"])
def test_sending_old_values(kind, changes):
    b, joined = _unit_join(kind)
    joined._enable_old_values()              # Kafka's enableSendingOldValues(true) on the join
    for phase, (_, expected) in enumerate(zip(_pipe_phases(b), WITH_OLD[kind])):
        assert changes == expected, f"phase {phase}"
        changes.clear()


@pytest.mark.parametrize("kind", ["inner", "left", "right", "outer"])
def test_should_log_and_meter_skipped_records_due_to_null_left_key(kind, caplog):
    """shouldLogAndMeterSkippedRecordsDueToNullLeftKey: the join processor itself drops a null key."""
    p = Pipeline(["right"], TableTableJoin(kind, ValueGetter("right", []), lambda k, a, b: (a, b), lambda: False))
    p.task.source = ("left", -1, -2)
    assert p.pipe(None, Change("new", "old"), 0) == []
    assert "Skipping record due to null key. topic=[left] partition=[-1] offset=[-2]" in caplog.text


# ---------------------------------------------------------------------- TableTableJoinIntegrationTest
STORE = "table-table-join-integration-test-store"
INPUT = [("L", None, 1), ("R", None, 2), ("L", "A", 3), ("R", "a", 4), ("L", "B", 5), ("R", "b", 6), ("L", None, 7),
         ("R", None, 8), ("L", "C", 9), ("R", "c", 10), ("R", None, 11), ("L", None, 12), ("R", None, 13),
         ("R", "d", 7),      # out of order, with null as latest
         ("L", "D", 6), ("L", None, 2), ("R", None, 3), ("R", "e", 14), ("L", "E", 15),
         ("L", None, 10),    # out of order, with a value as latest
         ("R", None, 9), ("L", "F", 4), ("R", "f", 3)]
IN_ORDER = [(side, v, ts, 0) for side, v, ts in INPUT[:13]] + [
    ("R", "d", 14, 0), ("L", "D", 15, 0), ("L", "E", 16, None), ("R", "e", 17, None)]    # the last two: null keys


def _expect(spec: str) -> list[tuple]:
    """``"A-a@4 ~@7"``: (value, timestamp) per record, ``~`` a tombstone; "" nothing."""
    out = []
    for item in spec.split():
        value, ts = item.rsplit("@", 1)
        out.append((None if value == "~" else value, int(ts)))
    return out


def _join_joiner(v1, v2) -> str:
    return f"{_s(v1)}-{_s(v2)}"


def _run_integration(build, cache: bool, steps):
    """AbstractJoinIntegrationTest.runTestWithDriver: pipe each step, read what it produced."""
    b = StreamsBuilder()
    build(b).toStream().to("outputTopic", Produced.with_(L, S))
    config = {"application.id": "table-table-join-integration-test"}
    if not cache:
        config["statestore.cache.max.bytes"] = 0
    d = TopologyTestDriver(b.build(), config)
    left, right = d.createInputTopic("inputTopicLeft", L, S), d.createInputTopic("inputTopicRight", L, S)
    out = d.createOutputTopic("outputTopic", L, S)
    produced = []
    for side, value, ts, *key in steps:
        (left if side == "L" else right).pipeInput(key[0] if key else 0, value, ts)
        produced.append([(r.value, r.timestamp) for r in out.readRecordsToList()])
    return d, produced


def _check_store(d, final: tuple) -> None:
    """checkQueryableStore: the join's store holds exactly the last result."""
    entries = d.getTimestampedKeyValueStore(STORE).all()
    assert [(k, v.value, v.timestamp) for k, v in entries] == [(0, *final)]


def _materialized():
    """Kafka's test also disables logging; Riverlog's stores are always logged."""
    return Materialized.as_(STORE).withKeySerde(L).withValueSerde(S).withCachingDisabled()


def _table(b, side: str, versioned: bool):
    topic = "inputTopicLeft" if side == "L" else "inputTopicRight"
    name = "left" if side == "L" else "right"
    store = Stores.persistentVersionedKeyValueStore(name, 300_000) if versioned else name
    return b.table(topic, Consumed.with_(L, S), Materialized.as_(store))


def _join(kind: str, this, other, joiner, materialized=None):
    join = {"inner": this.join, "left": this.leftJoin, "outer": this.outerJoin}[kind]
    return join(other, joiner) if materialized is None else join(other, joiner, materialized)


SINGLE = {
    # (left versioned, right versioned): {kind: per-step results without the cache}; final with it
    (False, False): ({
        "inner": ["", "", "", "A-a@4", "B-a@5", "B-b@6", "~@7", "", "", "C-c@10", "~@11", "", "", "", "D-d@7", "~@7",
                  "", "", "E-e@15", "~@14", "", "", "F-f@4"],
        "left": ["", "", "A-null@3", "A-a@4", "B-a@5", "B-b@6", "~@7", "", "C-null@9", "C-c@10", "C-null@11", "~@12",
                 "", "", "D-d@7", "~@7", "", "", "E-e@15", "~@14", "", "F-null@4", "F-f@4"],
        "outer": ["", "", "A-null@3", "A-a@4", "B-a@5", "B-b@6", "null-b@7", "~@8", "C-null@9", "C-c@10", "C-null@11",
                  "~@12", "", "null-d@7", "D-d@7", "null-d@7", "~@3", "null-e@14", "E-e@15", "null-e@14", "~@9",
                  "F-null@4", "F-f@4"],
    }, ("F-f", 4)),
    (True, True): ({     # versioned stores are never cached: the same results either way
        "inner": ["", "", "", "A-a@4", "B-a@5", "B-b@6", "~@7", "", "", "C-c@10", "~@11", "", "", "", "", "", "", "",
                  "E-e@15", "", "", "", ""],
        "left": ["", "", "A-null@3", "A-a@4", "B-a@5", "B-b@6", "~@7", "", "C-null@9", "C-c@10", "C-null@11", "~@12",
                 "", "", "", "", "", "", "E-e@15", "", "", "", ""],
        "outer": ["", "", "A-null@3", "A-a@4", "B-a@5", "B-b@6", "null-b@7", "~@8", "C-null@9", "C-c@10", "C-null@11",
                  "~@12", "", "", "", "", "", "null-e@14", "E-e@15", "", "", "", ""],
    }, None),
    (True, False): ({
        "inner": ["", "", "", "A-a@4", "B-a@5", "B-b@6", "~@7", "", "", "C-c@10", "~@11", "", "", "", "", "", "", "",
                  "E-e@15", "", "~@15", "", "E-f@15"],
        "left": ["", "", "A-null@3", "A-a@4", "B-a@5", "B-b@6", "~@7", "", "C-null@9", "C-c@10", "C-null@11", "~@12",
                 "", "", "", "", "", "", "E-e@15", "", "E-null@15", "", "E-f@15"],
        "outer": ["", "", "A-null@3", "A-a@4", "B-a@5", "B-b@6", "null-b@7", "~@8", "C-null@9", "C-c@10", "C-null@11",
                  "~@12", "", "null-d@7", "", "", "~@3", "null-e@14", "E-e@15", "", "E-null@15", "", "E-f@15"],
    }, ("E-f", 15)),
    (False, True): ({
        "inner": ["", "", "", "A-a@4", "B-a@5", "B-b@6", "~@7", "", "", "C-c@10", "~@11", "", "", "", "", "", "", "",
                  "E-e@15", "~@14", "", "F-e@14", ""],
        "left": ["", "", "A-null@3", "A-a@4", "B-a@5", "B-b@6", "~@7", "", "C-null@9", "C-c@10", "C-null@11", "~@12",
                 "", "", "D-null@6", "~@2", "", "", "E-e@15", "~@14", "", "F-e@14", ""],
        "outer": ["", "", "A-null@3", "A-a@4", "B-a@5", "B-b@6", "null-b@7", "~@8", "C-null@9", "C-c@10", "C-null@11",
                  "~@12", "", "", "D-null@6", "~@2", "", "null-e@14", "E-e@15", "null-e@14", "", "F-e@14", ""],
    }, ("F-e", 14)),
}


@pytest.mark.parametrize("cache", [False, True], ids=["uncached", "cached"])
@pytest.mark.parametrize("kind", ["inner", "left", "outer"])
@pytest.mark.parametrize("versioned", list(SINGLE), ids=["plain", "versioned", "left-versioned", "right-versioned"])
def test_table_table_join_integration(versioned, kind, cache):
    per_step, final_cached = SINGLE[versioned]

    def build(b):
        return _join(kind, _table(b, "L", versioned[0]), _table(b, "R", versioned[1]), _join_joiner, _materialized())
    d, produced = _run_integration(build, cache, [(s, v, ts) for s, v, ts in INPUT])
    expected = [_expect(spec) for spec in per_step[kind]]
    if cache and final_cached is not None:       # Kafka checks the last result only
        assert [r for rs in produced for r in rs][-1] == final_cached
        final = final_cached
    else:
        for step, (got, want) in enumerate(zip(produced, expected), 1):
            assert got == want, f"step {step} {INPUT[step - 1]}"
        final = [r for rs in expected for r in rs][-1]
    _check_store(d, final)


MULTI = {
    ("inner", "inner"): ["", "", "", "A-a-a@4 A-a-a@4", "B-a-a@5", "B-b-b@6 B-b-b@6", "~@7", "", "",
                         "C-c-c@10 C-c-c@10", "", "", "", "", "D-d-d@15", "", ""],
    ("inner", "left"): ["", "", "", "A-a-a@4 A-a-a@4", "B-a-a@5", "B-b-b@6 B-b-b@6", "~@7", "", "",
                        "C-c-c@10 C-c-c@10", "~@11", "", "", "", "D-d-d@15", "", ""],
    ("inner", "outer"): ["", "", "", "A-a-a@4 A-a-a@4", "B-a-a@5", "B-b-b@6 B-b-b@6", "null-b@7", "~@8", "",
                         "C-c-c@10 C-c-c@10", "~@11 ~@11", "", "", "null-d@14", "D-d-d@15", "", ""],
    ("left", "inner"): ["", "", "", "A-a-a@4 A-a-a@4", "B-a-a@5", "B-b-b@6 B-b-b@6", "~@7", "", "",
                        "C-c-c@10 C-c-c@10", "~@11", "", "", "", "D-d-d@15", "", ""],
    ("left", "left"): ["", "", "A-null-null@3", "A-a-a@4 A-a-a@4", "B-a-a@5", "B-b-b@6 B-b-b@6", "~@7", "",
                       "C-null-null@9", "C-c-c@10 C-c-c@10", "C-null-null@11 C-null-null@11", "~@12", "", "",
                       "D-d-d@15", "", ""],
    ("left", "outer"): ["", "", "A-null-null@3", "A-a-a@4 A-a-a@4", "B-a-a@5", "B-b-b@6 B-b-b@6", "null-b@7", "~@8",
                        "C-null-null@9", "C-c-c@10 C-c-c@10", "C-null-null@11 C-null-null@11", "~@12", "",
                        "null-d@14", "D-d-d@15", "", ""],
    ("outer", "inner"): ["", "", "", "A-a-a@4 A-a-a@4", "B-a-a@5", "B-b-b@6 B-b-b@6", "null-b-b@7", "", "",
                         "C-c-c@10 C-c-c@10", "~@11", "", "", "null-d-d@14 null-d-d@14", "D-d-d@15", "", ""],
    ("outer", "left"): ["", "", "A-null-null@3", "A-a-a@4 A-a-a@4", "B-a-a@5", "B-b-b@6 B-b-b@6", "null-b-b@7", "~@8",
                        "C-null-null@9", "C-c-c@10 C-c-c@10", "C-null-null@11 C-null-null@11", "~@12", "",
                        "null-d-d@14 null-d-d@14", "D-d-d@15", "", ""],
    ("outer", "outer"): ["", "", "A-null-null@3", "A-a-a@4 A-a-a@4", "B-a-a@5", "B-b-b@6 B-b-b@6", "null-b-b@7",
                         "~@8 ~@8", "C-null-null@9", "C-c-c@10 C-c-c@10", "C-null-null@11 C-null-null@11", "~@12", "",
                         "null-d-d@14 null-d-d@14", "D-d-d@15", "", ""],
}


@pytest.mark.parametrize("cache", [False, True], ids=["uncached", "cached"])
@pytest.mark.parametrize("kinds", list(MULTI), ids=["-".join(k) for k in MULTI])
def test_two_table_table_joins_in_a_chain(kinds, cache):
    """``left.X(right).Y(right, materialized)``: the right table feeds both joins, so one right
    update reaches the second join twice (KAFKA-6443: Kafka's tests expect the duplicates)."""
    def build(b):
        left, right = _table(b, "L", False), _table(b, "R", False)
        return _join(kinds[1], _join(kinds[0], left, right, _join_joiner), right, _join_joiner, _materialized())
    if cache:     # Kafka runs the cached variant on the out-of-order input and checks the last result
        d, produced = _run_integration(build, cache, [(s, v, ts) for s, v, ts in INPUT])
        assert [r for rs in produced for r in rs][-1] == ("F-f-f", 4)
        _check_store(d, ("F-f-f", 4))
        return
    d, produced = _run_integration(build, cache, IN_ORDER)
    expected = [_expect(spec) for spec in MULTI[kinds]]
    for step, (got, want) in enumerate(zip(produced, expected), 1):
        assert got == want, f"step {step} {IN_ORDER[step - 1]}"
    _check_store(d, [r for rs in expected for r in rs][-1])


@pytest.mark.parametrize("join_store, expected", [(None, [("k", None, 7)]), ("joined", []),
                                                 ("joined-uncached", [("k", None, 7)])])
def test_a_delete_of_a_row_that_never_joined(join_store, expected):
    """The right table deletes a key it never held (its store uncached, so the delete reaches the
    join): the inner join forwards ``Change(null, null)`` at the larger timestamp. Unmaterialized
    (``KTableKTableJoinMerger`` without a store) that is a tombstone downstream; a cached join
    store's flush drops a change from nothing to nothing; an uncached one forwards it."""
    b = StreamsBuilder()
    left = b.table("left", Consumed.with_(S, S))
    right = b.table("right", Consumed.with_(S, S), Materialized.as_("right").withCachingDisabled())
    args = [] if join_store is None else [Materialized.as_(join_store) if join_store == "joined"
                                          else Materialized.as_(join_store).withCachingDisabled()]
    left.join(right, _join_joiner, *args).toStream().to("out", Produced.with_(S, S))
    d = TopologyTestDriver(b.build(), {"application.id": "never-joined"})
    d.createInputTopic("left", S, S).pipeInput("k", "X", 7)
    d.createInputTopic("right", S, S).pipeInput("k", None, 3)
    assert [(r.key, r.value, r.timestamp) for r in d.createOutputTopic("out", S, S).readRecordsToList()] == expected
