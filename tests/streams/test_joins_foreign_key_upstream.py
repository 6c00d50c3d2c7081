"""Kafka's foreign-key join scenarios (``KTableKTableForeignKeyJoinIntegrationTest``) on the test
driver: inner and left, a queryable result store or none, and the result joined again with the
left table (which makes an unnamed result keep its store, as Kafka's ``KTableSource.materialize``).
Riverlog's one deliberate difference (docs/streams.md, "A foreign-key join's result is right in
any processing order"): an inner join answers every left change, so a new left row whose foreign
key has no right row gets a tombstone where Kafka emits nothing; those steps say so."""
from __future__ import annotations

import pytest

from streams import Consumed, Grouped, Materialized, Produced, Serdes, Stores, StreamsBuilder
from streams.testing import TopologyTestDriver

pytestmark = pytest.mark.unit
S = Serdes.String()
CASES = [(left, mat, rejoin) for left in (True, False) for mat in (True, False) for rejoin in (True, False)]


def joiner(a, b):
    return f"({a},{'null' if b is None else b})"      # Java's string of a null


class Scenario:
    """Kafka's ``getTopology``: left values ``"<payload>|<foreign key>"``, results ``(left,right)``."""

    def __init__(self, left_join: bool, materialized: bool, rejoin: bool = False, extractor=None,
                 left_versioned: bool = False, right_versioned: bool = False):
        b = StreamsBuilder()
        vm = lambda n: Materialized.as_(Stores.persistentVersionedKeyValueStore(n, 300_000))
        left = b.table("left_table", Consumed.with_(S, S), *([vm("left")] if left_versioned else []))
        right = b.table("right_table", Consumed.with_(S, S), *([vm("right")] if right_versioned else []))
        extractor = extractor or (lambda v: v.split("|")[1])
        main = (Materialized.as_("store").withValueSerde(S) if materialized else Materialized.with_(None, S))
        main = main.withCachingDisabled()
        fk = (left.leftJoin if left_join else left.join)(right, extractor, joiner, main)
        fk.toStream().to("output-topic", Produced.with_(S, S))
        if rejoin:
            again = (Materialized.as_("store-rejoin").withValueSerde(S).withCachingDisabled() if materialized
                     else Materialized.with_(None, S))
            (fk.leftJoin if left_join else fk.join)(left, lambda a, b: f"rejoin({a},{b})", again) \
                .toStream().to("rejoin-output-topic", Produced.with_(S, S))
        self.driver = TopologyTestDriver(b.build(), {"application.id": "fk-upstream"})
        self.left = self.driver.createInputTopic("left_table", S, S)
        self.right = self.driver.createInputTopic("right_table", S, S)
        self.output = self.driver.createOutputTopic("output-topic", S, S)
        self.rejoin = self.driver.createOutputTopic("rejoin-output-topic", S, S) if rejoin else None
        self.materialized = materialized

    def expect(self, output: dict, store: dict | None = None) -> None:
        assert self.output.readKeyValuesToMap() == output
        if self.materialized and store is not None:
            assert dict(self.driver.getKeyValueStore("store").all()) == store


@pytest.mark.parametrize("left_join,materialized,rejoin", CASES)
def test_join_from_left_then_delete_left_entity(left_join, materialized, rejoin):
    s = Scenario(left_join, materialized, rejoin)
    for i in (1, 2, 3):
        s.right.pipeInput(f"rhs{i}", f"rhsValue{i}", i - 1)     # rhs3 is referenced by nobody
    s.expect({}, {})
    s.left.pipeInput("lhs1", "lhsValue1|rhs1", 3)
    s.left.pipeInput("lhs2", "lhsValue2|rhs2", 4)
    both = {"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs2": "(lhsValue2|rhs2,rhsValue2)"}
    s.expect(both, both)
    if rejoin:
        assert s.rejoin.readKeyValuesToMap() == {"lhs1": "rejoin((lhsValue1|rhs1,rhsValue1),lhsValue1|rhs1)",
                                                 "lhs2": "rejoin((lhsValue2|rhs2,rhsValue2),lhsValue2|rhs2)"}
    s.left.pipeInput("lhs3", "lhsValue3|rhs1", 5)
    s.expect({"lhs3": "(lhsValue3|rhs1,rhsValue1)"}, {**both, "lhs3": "(lhsValue3|rhs1,rhsValue1)"})
    if rejoin:
        assert s.rejoin.readKeyValuesToMap() == {"lhs3": "rejoin((lhsValue3|rhs1,rhsValue1),lhsValue3|rhs1)"}
    s.left.pipeInput("lhs1", None, 6)
    s.expect({"lhs1": None}, {"lhs2": both["lhs2"], "lhs3": "(lhsValue3|rhs1,rhsValue1)"})
    if rejoin:
        assert s.rejoin.readKeyValuesToMap() == {"lhs1": None}


@pytest.mark.parametrize("left_join,materialized,rejoin", CASES)
def test_join_from_right_then_delete_right_entity(left_join, materialized, rejoin):
    s = Scenario(left_join, materialized, rejoin)
    s.left.pipeInput("lhs1", "lhsValue1|rhs1", 0)
    s.left.pipeInput("lhs2", "lhsValue2|rhs2", 1)
    s.left.pipeInput("lhs3", "lhsValue3|rhs1", 2)
    halves = {"lhs1": "(lhsValue1|rhs1,null)", "lhs2": "(lhsValue2|rhs2,null)", "lhs3": "(lhsValue3|rhs1,null)"}
    # Kafka's inner join: {} (a new row without a match is not answered); here tombstones
    s.expect(halves if left_join else dict.fromkeys(halves), halves if left_join else {})
    s.right.pipeInput("rhs1", "rhsValue1", 3)
    one = {"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs3": "(lhsValue3|rhs1,rhsValue1)"}
    s.expect(one, {**halves, **one} if left_join else one)
    s.right.pipeInput("rhs2", "rhsValue2", 4)
    full = {**one, "lhs2": "(lhsValue2|rhs2,rhsValue2)"}
    s.expect({"lhs2": full["lhs2"]}, full)
    s.right.pipeInput("rhs3", "rhsValue3", 5)
    s.expect({}, full)
    s.right.pipeInput("rhs1", None, 6)
    s.expect({"lhs1": halves["lhs1"] if left_join else None, "lhs3": halves["lhs3"] if left_join else None},
             {**halves, "lhs2": full["lhs2"]} if left_join else {"lhs2": full["lhs2"]})


@pytest.mark.parametrize("left_join,materialized,rejoin", CASES)
def test_deleting_a_non_joining_row_emits_a_tombstone_and_deleting_it_again_nothing(left_join, materialized, rejoin):
    s = Scenario(left_join, materialized, rejoin)
    s.left.pipeInput("lhs1", "lhsValue1|rhs1", 0)
    s.expect({"lhs1": "(lhsValue1|rhs1,null)"} if left_join else {"lhs1": None},   # Kafka's inner: {}
             {"lhs1": "(lhsValue1|rhs1,null)"} if left_join else {})
    s.left.pipeInput("lhs1", None, 1)
    s.expect({"lhs1": None}, {})
    s.left.pipeInput("lhs1", None, 2)
    s.expect({}, {})


@pytest.mark.parametrize("left_join,materialized,rejoin", CASES)
def test_deleting_a_row_that_never_existed_emits_nothing(left_join, materialized, rejoin):
    s = Scenario(left_join, materialized, rejoin)
    s.left.pipeInput("lhs1", None, 0)
    s.expect({}, {})


@pytest.mark.parametrize("left_join,materialized,rejoin", CASES)
def test_a_value_with_a_non_matching_foreign_key_gives_nulls(left_join, materialized, rejoin):
    s = Scenario(left_join, materialized, rejoin)
    half = lambda fk: {"lhs1": f"(lhsValue1|{fk},null)" if left_join else None}
    s.left.pipeInput("lhs1", "lhsValue1|rhs1", 0)
    s.expect(half("rhs1"), half("rhs1") if left_join else {})     # Kafka's inner: {}
    s.left.pipeInput("lhs1", "lhsValue1|rhs2", 1)                  # moving between absent keys
    s.expect(half("rhs2"), half("rhs2") if left_join else {})
    s.left.pipeInput("lhs1", "lhsValue1|rhs3", 2)
    s.expect(half("rhs3"), half("rhs3") if left_join else {})
    s.right.pipeInput("rhs1", "rhsValue1", 3)                      # referenced before, not now
    s.expect({}, half("rhs3") if left_join else {})
    s.left.pipeInput("lhs1", "lhsValue1|rhs1", 4)
    s.expect({"lhs1": "(lhsValue1|rhs1,rhsValue1)"}, {"lhs1": "(lhsValue1|rhs1,rhsValue1)"})
    s.left.pipeInput("lhs1", "lhsValue1|rhs2", 5)
    s.expect(half("rhs2"), half("rhs2") if left_join else {})


@pytest.mark.parametrize("left_join,materialized,rejoin", CASES)
def test_a_changed_foreign_key_unsubscribes_from_the_old_one(left_join, materialized, rejoin):
    s = Scenario(left_join, materialized, rejoin)
    s.right.pipeInput("rhs1", "rhsValue1", 0)
    s.right.pipeInput("rhs2", "rhsValue2", 1)
    s.left.pipeInput("lhs1", "lhsValue1|rhs1", 2)
    s.expect({"lhs1": "(lhsValue1|rhs1,rhsValue1)"}, {"lhs1": "(lhsValue1|rhs1,rhsValue1)"})
    s.left.pipeInput("lhs1", "lhsValue1|rhs2", 3)
    s.expect({"lhs1": "(lhsValue1|rhs2,rhsValue2)"}, {"lhs1": "(lhsValue1|rhs2,rhsValue2)"})
    s.right.pipeInput("rhs1", "rhsValue1Delta", 4)
    s.expect({}, {"lhs1": "(lhsValue1|rhs2,rhsValue2)"})


@pytest.mark.parametrize("materialized,rejoin", [(m, r) for m in (True, False) for r in (True, False)])
def test_left_join_emits_a_row_whose_foreign_key_is_null(materialized, rejoin):
    s = Scenario(True, materialized, rejoin, extractor=lambda v: None)
    s.left.pipeInput("lhs1", "lhsValue1|rhs1", 0)
    s.expect({"lhs1": "(lhsValue1|rhs1,null)"}, {"lhs1": "(lhsValue1|rhs1,null)"})


@pytest.mark.parametrize("materialized,rejoin", [(m, r) for m in (True, False) for r in (True, False)])
def test_left_join_emits_when_the_foreign_key_becomes_null(materialized, rejoin):
    s = Scenario(True, materialized, rejoin, extractor=lambda v: None if v.endswith("returnNull") else v.split("|")[1])
    s.left.pipeInput("lhs1", "lhsValue1|rhs1", 0)
    s.expect({"lhs1": "(lhsValue1|rhs1,null)"}, {"lhs1": "(lhsValue1|rhs1,null)"})
    s.left.pipeInput("lhs1", "lhsValue1|returnNull", 0)
    s.expect({"lhs1": "(lhsValue1|returnNull,null)"}, {"lhs1": "(lhsValue1|returnNull,null)"})
    s.right.pipeInput("rhs1", "rhsValue1", 1)                     # the old subscription is gone
    s.expect({}, {"lhs1": "(lhsValue1|returnNull,null)"})


@pytest.mark.parametrize("left_join,materialized,left_versioned,right_versioned",
                         [(lj, m, lv, rv) for lj in (True, False) for m in (True, False)
                          for lv in (True, False) for rv in (True, False)])
def test_out_of_order_records_are_ignored_iff_versioned(left_join, materialized, left_versioned, right_versioned):
    s = Scenario(left_join, materialized, left_versioned=left_versioned, right_versioned=right_versioned)
    s.right.pipeInput("rhs1", "rhsValue1", 4)
    s.expect({}, {})
    s.left.pipeInput("lhs1", "lhsValue1|rhs1", 3)
    s.left.pipeInput("lhs2", "lhsValue2|rhs1", 5)
    two = {"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs2": "(lhsValue2|rhs1,rhsValue1)"}
    s.expect(two, two)
    s.left.pipeInput("lhs2", None, 6)
    s.expect({"lhs2": None}, {"lhs1": two["lhs1"]})
    s.left.pipeInput("lhs1", "lhsValue1_ooo|rhs1", 2)
    s.left.pipeInput("lhs2", "lhsValue2_ooo|rhs1", 2)
    ooo = {"lhs1": "(lhsValue1_ooo|rhs1,rhsValue1)", "lhs2": "(lhsValue2_ooo|rhs1,rhsValue1)"}
    s.expect({} if left_versioned else ooo, {"lhs1": two["lhs1"]} if left_versioned else ooo)
    s.left.pipeInput("lhs1", None, 2)
    s.expect({} if left_versioned else {"lhs1": None},
             {"lhs1": two["lhs1"]} if left_versioned else {"lhs2": ooo["lhs2"]})
    s.left.pipeInput("lhs1", "lhsValue1_new|rhs1", 8)
    s.left.pipeInput("lhs2", "lhsValue2_new|rhs1", 8)
    new = {"lhs1": "(lhsValue1_new|rhs1,rhsValue1)", "lhs2": "(lhsValue2_new|rhs1,rhsValue1)"}
    s.expect(new, new)
    s.right.pipeInput("rhs1", "rhsValue1_ooo", 1)
    late = {"lhs1": "(lhsValue1_new|rhs1,rhsValue1_ooo)", "lhs2": "(lhsValue2_new|rhs1,rhsValue1_ooo)"}
    s.expect({} if right_versioned else late, new if right_versioned else late)
    s.right.pipeInput("rhs1", None, 1)
    gone = {"lhs1": "(lhsValue1_new|rhs1,null)", "lhs2": "(lhsValue2_new|rhs1,null)"}
    if right_versioned:
        s.expect({}, new)
    else:
        s.expect(gone if left_join else {"lhs1": None, "lhs2": None}, gone if left_join else {})


def test_a_regrouped_result_without_a_store_subtracts_the_old_result():
    """``groupBy`` needs each result's old value: an unnamed result keeps its drawn store for it
    (Kafka's ``enableSendingOldValues`` materializes the ``KTableSource``), so a row moving from
    ``A`` to ``B`` takes its count from ``A``."""
    b = StreamsBuilder()
    left = b.table("left", Consumed.with_(S, S))
    right = b.table("right", Consumed.with_(S, S))
    left.join(right, lambda v: v.split(":")[0], lambda l, r: r) \
        .groupBy(lambda k, v: (v, v), Grouped.with_(S, S)).count() \
        .toStream().to("out", Produced.with_(S, Serdes.Long()))
    d = TopologyTestDriver(b.build(), {"application.id": "fk-regroup"})
    lt, rt = d.createInputTopic("left", S, S), d.createInputTopic("right", S, S)
    out = d.createOutputTopic("out", S, Serdes.Long())
    rt.pipeInput("A", "a", 1)
    rt.pipeInput("B", "b", 2)
    lt.pipeInput("l1", "A:1", 3)
    lt.pipeInput("l1", "B:1", 4)
    assert out.readKeyValuesToList() == [("a", 1), ("a", 0), ("b", 1)]


def _unnamed_fk_join(materialized=None):
    b = StreamsBuilder()
    left = b.table("left", Consumed.with_(S, S))
    right = b.table("right", Consumed.with_(S, S))
    fk = left.join(right, lambda v: v.split(":")[0], lambda l, r: f"{l}+{r}", *([materialized] if materialized else []))
    return b, left, fk


def test_an_unnamed_result_keeps_no_store_and_no_changelog():
    """As Kafka's: ``Materialized.with_`` (no name) draws the store's name but keeps no store, so no
    ``KTABLE-FK-JOIN-OUTPUT-STATE-STORE-…-changelog`` topic is created and every result is forwarded."""
    b, _, fk = _unnamed_fk_join(Materialized.with_(S, S))
    fk.toStream().to("out", Produced.with_(S, S))
    assert fk.queryableStoreName() is None
    stores = b.build().stores()
    assert not [s for s in stores if "FK-JOIN-OUTPUT" in s], stores
    assert [s for s in stores if "SUBSCRIPTION-STATE-STORE" in s]


def test_an_unnamed_result_joined_again_keeps_its_drawn_store():
    """A join reading the result (Kafka's ``valueGetterSupplier`` materializes it) gets the store
    whose name the join drew; Kafka's rejoin without any ``Materialized``."""
    b, left, fk = _unnamed_fk_join()
    fk.join(left, lambda a, c: f"rejoin({a},{c})").toStream().to("out", Produced.with_(S, S))
    topology = b.build()
    assert "KTABLE-FK-JOIN-OUTPUT-STATE-STORE-0000000019" in topology.stores()
    d = TopologyTestDriver(topology, {"application.id": "fk-rejoin"})
    lt, rt = d.createInputTopic("left", S, S), d.createInputTopic("right", S, S)
    out = d.createOutputTopic("out", S, S)
    rt.pipeInput("A", "a", 1)
    lt.pipeInput("l1", "A:1", 2)
    assert out.readKeyValuesToMap() == {"l1": "rejoin(A:1+a,A:1)"}
    rt.pipeInput("A", None, 3)
    assert out.readKeyValuesToMap() == {"l1": None}


# ---------------------------------------------------------------- KTableKTableForeignKeyJoinScenarioTest
I = Serdes.Integer()
_fk_joiner = lambda a, b: f"({a},{b})"


def _fk_result(a, b, m):
    return a.join(b, lambda v: int(v.split("-")[0]), _fk_joiner, *([m] if m is not None else []))


@pytest.mark.parametrize("variant", ["default", "consumed", "join-result", "equi-join-result", "produced", "unnamed"])
def test_default_serdes_reach_every_part_of_the_join(variant):
    """Kafka's ``validateTopologyCanProcessData``: default Integer keys and String values, with
    serdes given in one place or another; the foreign-key result joined again by primary key."""
    b = StreamsBuilder()
    a = b.table("A", Consumed.with_(I, S)) if variant == "consumed" else b.table("A")
    bt = b.table("B")
    m = {"join-result": Materialized.as_("asdf").withKeySerde(I).withValueSerde(S),
         "unnamed": None}.get(variant, Materialized.as_("asdf"))
    final = a.join(_fk_result(a, bt, m), _fk_joiner,
                   *([Materialized.with_(I, S)] if variant == "equi-join-result" else []))
    final.toStream().to("output", *([Produced.with_(I, S)] if variant == "produced" else []))
    config = {"application.id": "fk-serdes", "default.key.serde": "org.apache.kafka.common.serialization.Serdes$IntegerSerde",
              "default.value.serde": "org.apache.kafka.common.serialization.Serdes$StringSerde"}
    d = TopologyTestDriver(b.build(), config)
    d.createInputTopic("A", I, S).pipeInput(1, "999-alpha")
    d.createInputTopic("B", I, S).pipeInput(999, "beta")
    assert d.createOutputTopic("output", I, S).readKeyValuesToMap() == {1: "(999-alpha,(999-alpha,beta))"}


# ---------------------------------------------------------------- KTableKTableForeignKeyInnerJoinMultiIntegrationTest
@pytest.mark.parametrize("materialized", [True, False])
def test_two_chained_foreign_key_joins_over_several_partitions(materialized):
    """table1 (Integer → Float) joins table2 (String → Long) by ``str(int(value))``; that result
    joins table3 (Integer → String) by a key read from the joined value. Kafka's test names both
    stores; without them the first result gets its drawn store for the second join's resolver
    (its value getter materializes it, as Kafka's ``valueGetterSupplier``)."""
    from streams.interpreter import Interpreter
    F, L = Serdes.Float(), Serdes.Long()
    b = StreamsBuilder()
    t1 = b.table("table1", Consumed.with_(I, F))
    t2 = b.table("table2", Consumed.with_(S, L))
    t3 = b.table("table3", Consumed.with_(I, S))
    m1 = (Materialized.as_("one").withKeySerde(I).withValueSerde(S),) if materialized else ()
    m2 = (Materialized.as_("two").withKeySerde(I).withValueSerde(S),) if materialized else ()
    t1.join(t2, lambda v: str(int(v)), lambda a, c: f"value1={a:.2f},value2={c}", *m1) \
        .join(t3, lambda v: 10 if "value2=10" in v else 0, lambda a, c: f"{a},value3={c}", *m2) \
        .toStream().to("output", Produced.with_(I, S))
    interp = Interpreter(b.build(), {"application.id": "fk-multi"}, {"table1": 3, "table2": 3, "table3": 2})
    for k, v in [(1, 1.33), (2, 2.22), (3, -1.22), (4, -2.22)]:
        interp.append("table1", I.serialize(k), F.serialize(v), 0)
    for k in range(10):
        interp.append("table2", S.serialize(str(k)), L.serialize(10 * k), 0)
    interp.append("table3", I.serialize(10), S.serialize("waffle"), 0)
    interp.run()
    while interp.pending:
        interp.commit()
        interp.run()
    last: dict = {}
    for part in interp.topics["output"]:
        for k, v, _, _ in part:
            last[I.deserialize(k)] = S.deserialize(v)
    assert {k: v for k, v in last.items() if v is not None} == {1: "value1=1.33,value2=10,value3=waffle"}


def test_a_right_update_answers_subscribers_in_serialized_key_order():
    """Kafka's fan-out prefix-scans the subscription store, whose keys end with the serialized
    primary key: Integer keys come out 1, 2, 256, -1 (0xFFFFFFFF last), whatever the order they
    subscribed in."""
    b = StreamsBuilder()
    left = b.table("left", Consumed.with_(I, S))
    right = b.table("right", Consumed.with_(S, S))
    left.join(right, lambda v: v, lambda l, r: r).toStream().to("out", Produced.with_(I, S))
    d = TopologyTestDriver(b.build(), {"application.id": "fk-order"})
    lt, rt = d.createInputTopic("left", I, S), d.createInputTopic("right", S, S)
    out = d.createOutputTopic("out", I, S)
    for k in (256, -1, 2, 1):
        lt.pipeInput(k, "A", 0)
    out.readKeyValuesToList()
    rt.pipeInput("A", "a", 1)
    assert [kv.key for kv in out.readKeyValuesToList()] == [1, 2, 256, -1]


@pytest.mark.parametrize("left_join", [True, False])
def test_a_left_delete_is_answered_by_its_old_foreign_key_at_the_later_timestamp(left_join):
    """Kafka answers a deleted left row from its old foreign key's task
    (``DELETE_KEY_AND_PROPAGATE``): the tombstone's timestamp is the larger of the delete's and the
    right row's, as every answer's is."""
    s = Scenario(left_join, materialized=False)
    s.right.pipeInput("rhs1", "rhsValue1", 0)
    s.left.pipeInput("lhs1", "lhsValue1|rhs1", 1)
    s.right.pipeInput("rhs1", "rhsValue1b", 20)
    assert [(r.key, r.value, r.timestamp) for r in s.output.readRecordsToList()] == [
        ("lhs1", "(lhsValue1|rhs1,rhsValue1)", 1), ("lhs1", "(lhsValue1|rhs1,rhsValue1b)", 20)]
    s.left.pipeInput("lhs1", None, 5)
    assert [(r.key, r.value, r.timestamp) for r in s.output.readRecordsToList()] == [("lhs1", None, 20)]


def test_table_joined_names_every_processor_topic_and_store():
    """Kafka's ``TableJoined.as(name)``/``withName(name)``: ``NamedInternal.suffixWithOrElseGet``."""
    from streams import TableJoined
    b = StreamsBuilder()
    left = b.table("left", Consumed.with_(S, S))
    right = b.table("right", Consumed.with_(S, S))
    left.join(right, lambda v: v, lambda l, r: r, TableJoined.as_("x").withName("lines"),
              Materialized.as_("result")).toStream().to("out")
    topology = b.build()
    text = str(topology.describe())
    for suffix in ("subscription-registration-processor", "subscription-registration-sink",
                   "subscription-registration-source", "subscription-receive", "subscription-join-foreign",
                   "foreign-join-subscription", "subscription-response-sink", "subscription-response-source",
                   "subscription-response-resolver", "result"):
        assert f"lines-{suffix}" in text, suffix
    assert "lines-subscription-registration-topic" in text
    assert "lines-subscription-response-topic" in text
    assert {"lines-subscription-store", "result"} <= set(topology.stores())


def test_a_filter_below_a_named_result_gets_its_old_values():
    """A filter asks for old values without forcing a store; a result named by ``Materialized.as_``
    has them (Kafka's ``KTableSource.materialized()``), so updates failing the filter before and
    after are dropped instead of each becoming a tombstone."""
    b = StreamsBuilder()
    left = b.table("left", Consumed.with_(S, S))
    right = b.table("right", Consumed.with_(S, S))
    left.join(right, lambda v: v.split("|")[1], lambda l, r: l, Materialized.as_("result")) \
        .filter(lambda k, v: "keep" in v).toStream().to("out", Produced.with_(S, S))
    d = TopologyTestDriver(b.build(), {"application.id": "fk-filter"})
    lt, rt, out = d.createInputTopic("left", S, S), d.createInputTopic("right", S, S), d.createOutputTopic("out", S, S)
    rt.pipeInput("A", "a", 0)
    lt.pipeInput("l1", "x|A", 1)
    lt.pipeInput("l1", "y|A", 2)
    lt.pipeInput("l1", "keep|A", 3)
    lt.pipeInput("l1", "z|A", 4)
    assert out.readKeyValuesToList() == [("l1", "keep|A"), ("l1", None)]
