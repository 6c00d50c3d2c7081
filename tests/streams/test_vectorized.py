"""Vectorised callables (``streams.vectorized``): through ``TopologyTestDriver`` they give what the
same per-record callables give; the functions Spark's Arrow UDFs run, over a whole batch
(``apply_batch``), give what the driver gives one record at a time; bad definitions fail when the
operation is defined and bad results name the operation."""
from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streams import vectorized
from streams.builder import StreamsBuilder
from streams.column_functions import VectorizedFunctionError, VectorizedResultError, _arrow_type, apply_batch
from streams.parameters import Consumed, Grouped, Produced
from streams.serdes import Serdes
from streams.spark_plan import plan, vectorized_fn
from streams.testing import TopologyTestDriver

pytestmark = pytest.mark.unit

S, L = Serdes.String(), Serdes.Long()
ORDER = "user STRING, amount BIGINT"
J = Serdes.Json(ORDER)
OUT = Serdes.Json("user STRING, gross BIGINT")
RECORDS = [("k1", {"user": "ann", "amount": 5}, 1), ("k2", {"user": "bob", "amount": 30}, 2),
           ("k3", {"user": None, "amount": None}, 3), ("k4", {"user": "cy", "amount": 12}, 4),
           ("k5", {"user": "ann", "amount": 0}, 5)]


def run(build, records=RECORDS, out_serdes=(S, OUT)):
    b = StreamsBuilder()
    build(b.stream("in", Consumed.with_(S, J))).to("out", Produced.with_(*out_serdes))
    d = TopologyTestDriver(b.build(), {"application.id": "v"})
    i = d.createInputTopic("in", S, J)
    for k, v, ts in records:
        i.pipeInput(k, v, ts)
    return [(kv.key, kv.value) for kv in d.createOutputTopic("out", *out_serdes).readKeyValuesToList()]


# Each case: the vectorised pipeline and the same pipeline with per-record callables.
def v_pipeline(s):
    return (s.filter(vectorized(lambda k, v: v["amount"] > 3))
            .filterNot(vectorized(lambda k, v: k == "k4"))
            .mapValues(vectorized(lambda v: pd.DataFrame({"user": v["user"].str.upper(), "gross": v["amount"] * 2}),
                                  "user STRING, gross BIGINT"))
            .selectKey(vectorized(lambda k, v: k + "-" + v["user"], "string")))


def r_pipeline(s):
    return (s.filter(lambda k, v: (v["amount"] or 0) > 3)
            .filterNot(lambda k, v: k == "k4")
            .mapValues(lambda v: {"user": v["user"].upper(), "gross": v["amount"] * 2})
            .selectKey(lambda k, v: k + "-" + v["user"]))


def test_a_vectorised_pipeline_gives_what_per_record_callables_give():
    got = run(v_pipeline)
    assert got == run(r_pipeline)
    assert got == [("k1-ANN", {"user": "ANN", "gross": 10}), ("k2-BOB", {"user": "BOB", "gross": 60})]


def test_map_returns_a_dataframe_or_a_pair_and_flat_map_values_lists():
    as_frame = vectorized(lambda k, v: pd.DataFrame({"key": v["user"], "value": v["amount"] + 1}),
                          "key STRING, value BIGINT")
    as_pair = vectorized("key string, value bigint")(lambda k, v: (v["user"], v["amount"] + 1))
    expected = [("ann", 6), ("bob", 31), (None, None), ("cy", 13), ("ann", 1)]
    assert run(lambda s: s.map(as_frame), out_serdes=(S, L)) == expected
    assert run(lambda s: s.map(as_pair), out_serdes=(S, L)) == expected
    repeat = vectorized(lambda v: v["amount"].map(lambda a: [] if pd.isna(a) else [int(a)] * min(int(a), 2)),
                        "array<bigint>")
    assert run(lambda s: s.flatMapValues(repeat), out_serdes=(S, L)) == [
        ("k1", 5), ("k1", 5), ("k2", 30), ("k2", 30), ("k4", 12), ("k4", 12)]


def test_definitions_are_checked_when_made():
    b = StreamsBuilder()
    s = b.stream("in", Consumed.with_(S, J))
    with pytest.raises(VectorizedFunctionError, match="mapValues mapper: a vectorized mapValues needs a returnType") as e:
        s.mapValues(vectorized(lambda v: v))
    assert e.value.code == 1220 and e.value.name == "VECTORIZED_FUNCTION_INVALID"
    with pytest.raises(VectorizedFunctionError, match="map's returnType is 'key <type>, value <type>'"):
        s.map(vectorized(lambda k, v: (k, v), "a string, b bigint"))
    with pytest.raises(VectorizedFunctionError, match="a predicate returns booleans"):
        s.filter(vectorized(lambda k, v: v, "bigint"))
    with pytest.raises(VectorizedFunctionError, match="groupBy selector: takes no vectorized function"):
        s.groupBy(vectorized(lambda k, v: k, "string"), Grouped.with_(S, J))
    with pytest.raises(VectorizedFunctionError, match="not a valid Spark DDL"):
        s.mapValues(vectorized(lambda v: v, "no such type at all"))


@pytest.mark.parametrize("fn, message", [
    (vectorized(lambda v: pd.Series([1, 2]), "bigint"), "returned 2 value\\(s\\) for 1 record\\(s\\)"),
    (vectorized(lambda v: 7, "bigint"), "returned int; expected a pandas Series"),
    (vectorized(lambda v: v["user"], "bigint"), "does not fit bigint"),
])
def test_a_bad_result_names_the_operation(fn, message):
    with pytest.raises(VectorizedResultError, match="mapValues mapper: .*" + message) as e:
        run(lambda s: s.mapValues(fn), out_serdes=(S, L))
    assert e.value.code == 1221


def test_describe_says_the_prefix_runs_vectorised():
    b = StreamsBuilder()
    v_pipeline(b.stream("in", Consumed.with_(S, J))).to("out", Produced.with_(S, OUT))
    text = str(b.build().describe())
    assert "all Spark SQL and vectorised Python (Arrow UDFs)" in text


# ------------------------------------------------------------------------------ the Spark path, without Spark
def spark_batch(records) -> pa.RecordBatch:
    """The rows Spark hands ``mapInArrow`` after decoding (key STRING, value struct)."""
    return pa.RecordBatch.from_arrays(
        [pa.array([k for k, _, _ in records], pa.string()),
         pa.array([v for _, v, _ in records], _arrow_type(J.spark_type())),
         pa.array(range(len(records)), pa.int64())], names=["key", "value", "offset"])


def batch_run(build, records):
    b = StreamsBuilder()
    build(b.stream("in", Consumed.with_(S, J))).to("out", Produced.with_(S, OUT))
    p = plan(b.build().subtopologies[0])
    assert p.sink is not None and all(vectorized_fn(n) is not None for n in p.prefix)
    steps = [(n.op, vectorized_fn(n)) for n in p.prefix]
    batch = spark_batch(records)
    out = apply_batch(batch, steps)
    return [] if out is None else list(zip(out.column("key").to_pylist(), out.column("value").to_pylist()))


users = st.one_of(st.none(), st.sampled_from(["ann", "bob", "cy"]))
amounts = st.one_of(st.none(), st.integers(-5, 50))
histories = st.lists(st.tuples(st.sampled_from(["k1", "k2", "k3", "k4"]),
                               st.fixed_dictionaries({"user": users, "amount": amounts}), st.just(1)),
                     min_size=1, max_size=12)


@settings(max_examples=40, deadline=None)
@given(histories)
def test_one_arrow_batch_gives_what_the_driver_gives_one_record_at_a_time(records):
    """Nulls make Spark's batch columns float or object where a one-row Series is not: an
    elementwise function must not care, and these do not."""
    def pipeline(s):
        return (s.filter(vectorized(lambda k, v: v["amount"].fillna(0) % 3 != 1))
                .mapValues(vectorized(lambda k, v: pd.DataFrame({"user": k + ":" + v["user"].fillna("?"),
                                                                   "gross": v["amount"] * 2}),
                                      "user STRING, gross BIGINT")))
    assert batch_run(pipeline, records) == run(pipeline, records)


def test_a_vectorised_step_survives_the_trip_to_spark_workers():
    """A task after a stateful step gets its processors pickled (``Fn.__getstate__``): the
    operation, the result type and the column types must come along."""
    import pickle

    from pyspark import cloudpickle
    b = StreamsBuilder()
    s = b.stream("in", Consumed.with_(S, J)).mapValues(vectorized(lambda v: v["amount"] + 1, "bigint"))
    f = pickle.loads(cloudpickle.dumps(s._node.args["mapper"]))
    assert (f.op, f.return_type.simpleString(), f.types[1].simpleString()) == \
        ("mapValues", "bigint", "struct<user:string,amount:bigint>")
    from streams.column_functions import call_record
    assert call_record(f, "k", {"user": "ann", "amount": 41}) == 42
