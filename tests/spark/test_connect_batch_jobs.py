"""What a connector's micro-batch costs in Spark jobs, on small local frames (no broker): under
``errors.tolerance=none`` the flagged records are not scanned before the write (the write's own job
fails, naming the record), and a JSON converter's inferred type is carried to later batches, with
a record that does not fit it flagged for a rebind instead of inferring again every batch; and what
a batch costs inside its job: a JSON value parsed once, however the sink filters the rows."""
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from connect import converters, record_frame
from connect.config import parse_connector_config
from connect.converters import JSON_CONVERTER, JsonConverter, decode
from connect.errors import DataError
from connect.pipeline import apply_tolerance, translated
from connect.transforms import chain, from_connector_config

pytestmark = pytest.mark.spark
GROUP = "connect-batch-jobs-test"


def source(spark, values):
    rows = [("orders", 0, i, None, None, v, []) for i, v in enumerate(values)]
    return record_frame.from_source(spark.createDataFrame(rows, "topic string, partition int, offset long, "
                                    "timestamp timestamp, key binary, value binary, "
                                    "headers array<struct<key string, value binary>>"))


def jobs(spark) -> int:
    return len(spark.sparkContext.statusTracker().getJobIdsForGroup(GROUP))


def config(**extra):
    return parse_connector_config({"name": "strict", "connector.class": "FileStreamSink", "topics": "orders",
                                   "value.converter": JSON_CONVERTER, **extra})


def test_tolerance_none_fails_the_write_itself_naming_the_record(spark):
    spark.sparkContext.setJobGroup(GROUP, "tolerance none")
    try:
        frame = source(spark, [b'{"id": 1}', b'{"id": 2}', b"{not json", b'{"id": 4}'])
        conv = JsonConverter({"schemas.enable": "false"}, schema="id BIGINT")
        frame = decode(frame, conv, "value")
        before = jobs(spark)
        good, _ = apply_tolerance(frame, config())
        assert jobs(spark) == before, "errors.tolerance=none ran a job before the write (an error scan)"
        with pytest.raises(Exception) as failed:
            good.select("value").collect()
        assert jobs(spark) > before  # the write's own job, and the count sees it
        error = translated(failed.value, config())
        assert isinstance(error, DataError)
        assert "topic 'orders' partition 0 offset 2: stage value.converter" in str(error)
        assert "errors.tolerance=none" in str(error)
        # With tolerance all, the good records go through and the flagged one is set aside.
        good, bad = apply_tolerance(frame, config(**{"errors.tolerance": "all"}))
        assert [r["value"]["id"] for r in good.orderBy("offset").collect()] == [1, 2, 4]
        assert [r["offset"] for r in bad.collect()] == [2]
    finally:
        for key in ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel"):
            spark.sparkContext.setLocalProperty(key, None)


def test_a_carried_json_type_flags_records_that_do_not_fit(spark):
    first = source(spark, [b'{"id": 1, "amount": 0.25}', b'{"id": 2, "amount": 12.5}'])
    bound = JsonConverter({"schemas.enable": "false"}).bind(first)
    assert bound.carriable()
    later = source(spark, [b'{"id": 3, "amount": 1.75}', b'{"id": 4, "amount": 2.5, "note": "new"}',
                           b'{"id": "five", "amount": 1}', b"{not json", None])
    out = decode(later, bound.carried(), "value").orderBy("offset").collect()
    stages = [r[record_frame.ERROR]["stage"] if r[record_frame.ERROR] else None for r in out]
    assert stages == [None, record_frame.REBIND, record_frame.REBIND, "value.converter", None]
    assert (out[0]["value"]["id"], out[0]["value"]["amount"]) == (3, 1.75)
    with pytest.raises(Exception) as failed:
        apply_tolerance(decode(later, bound.carried(), "value"), config(), rebind=True)[0].collect()
    assert type(translated(failed.value, config())).__name__ == "_Rebind"
    # The batch's own binding (what a rebind does) reads every fitting record, as before.
    rebound = JsonConverter({"schemas.enable": "false"}).bind(later)
    fresh = decode(later, rebound, "value").orderBy("offset").collect()
    assert fresh[1]["value"]["note"] == "new" and fresh[1][record_frame.ERROR] is None


@pytest.mark.parametrize("values", [[], [None, None], [b"null"]], ids=["empty", "nulls", "json-null"])
def test_a_batch_with_no_json_value_binds_no_type(spark, values):
    """A sink's first batch after a resume can hold only transaction markers (no rows): binding a
    type from it gave ``string``, kept for the connector, and every later batch of objects failed
    its struct transforms ("Only Struct objects supported for [mask fields], found: string")."""
    with pytest.raises(DataError, match="nothing to learn|no JSON value"):
        JsonConverter({"schemas.enable": "false"}).bind(source(spark, values))


def test_a_json_value_is_parsed_once_however_the_sink_filters_it(spark):
    """A filter above the converters (a sink's ``value IS NOT NULL``, a ``Filter`` transform) was
    pushed down by Spark through every projection and computed the parse and the checks again."""
    f = source(spark, [b'{"id": 1, "card": "4111"}', b'{"id": 2, "card": "4222"}', None])
    bound = JsonConverter({"schemas.enable": "false"}).bind(f)
    # MaskField fails a tombstone, as Kafka's does: the usual guard is a negated RecordIsTombstone
    steps = from_connector_config({"transforms": "mask", "transforms.mask.type":
                                   "org.apache.kafka.connect.transforms.MaskField$Value",
                                   "transforms.mask.fields": "card", "transforms.mask.predicate": "tombstone",
                                   "transforms.mask.negate": "true", "predicates": "tombstone",
                                   "predicates.tombstone.type":
                                   "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone"})
    for tolerance in ("none", "all"):
        for conv in (bound, bound.carried()):
            good, _ = apply_tolerance(chain(decode(f, conv, "value"), steps),
                                      config(**{"errors.tolerance": tolerance}), rebind=conv.carried_over)
            rows = good.where("value IS NOT NULL").select("value.*")
            plan = rows._jdf.queryExecution().executedPlan().toString()
            # one parse per value: the text, and only where that fails the leading-zeros retry
            # (coalesce evaluates it lazily); a pushed-down filter must not add any
            assert plan.count("parseJson(") == 2 and plan.count("coalesce(static_invoke(VariantExpressionEvalUtils"
                                                                ".parseJson(") == 1, plan
            assert [(r.id, r.card) for r in rows.orderBy("id").collect()] == [(1, ""), (2, "")]


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.integers(2**63, 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=2),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("xyz"), inner, max_size=2),
    max_leaves=6)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.dictionaries(st.sampled_from("abcd"), JSON_VALUES, min_size=1, max_size=3), min_size=1,
                max_size=5))
def test_a_value_of_a_shape_seen_when_binding_fits_the_bound_type(spark, batch):
    """The field-by-field check is skipped for a value whose shape was seen when the type was
    inferred (the type was merged from those shapes): the check, run anyway, finds nothing there."""
    f = source(spark, [json.dumps(o).encode() for o in batch])
    bound = JsonConverter({"schemas.enable": "false"}).bind(f)
    v = F.try_parse_json(F.col("value").cast("string"))
    wire = F.try_variant_get(v, "$", bound.data_type.simpleString())
    decoded = decode(f, bound.carried(), "value")
    flagged = decoded.where(F.col(record_frame.ERROR).isNotNull()).count()
    mismatched = f.where(converters._mismatch(v, wire, bound.data_type)).count()
    assert (flagged, mismatched) == (0, 0)


def test_a_plan_template_moves_only_onto_a_leaf_with_the_same_attributes(spark):
    """The template's refusals (see connect.plan_template): a leaf whose attributes differ (another
    frame), a plan of two leaves, a new key — each builds afresh; the same attributes move."""
    from connect.plan_template import PlanTemplate
    built = []

    def build(batch):
        built.append(batch)
        return batch.select((F.col("id") * 2).alias("twice")).where("twice > 2")

    first = spark.createDataFrame([(1,), (2,), (3,)], "id long")
    template = PlanTemplate()
    assert sorted(r.twice for r in template.frame("k", first, build).collect()) == [4, 6]
    # The same leaf again (as foreachBatch's leaves share the query's attributes): moved, not built.
    moved = template.frame("k", first, build)
    assert (len(built), template.moves) == (1, 1)
    assert sorted(r.twice for r in moved.collect()) == [4, 6]
    other = spark.createDataFrame([(5,), (1,)], "id long")  # same names, other attributes
    assert [r.twice for r in template.frame("k", other, build).collect()] == [10]
    assert (len(built), template.moves) == (2, 1)
    template.frame("new key", other, build)
    assert len(built) == 3
    joined = lambda batch: batch.join(other, "id")  # noqa: E731 - two leaves: not a template
    template.frame("j", first, lambda b: built.append(b) or joined(b))
    assert [r.id for r in template.frame("j", first, lambda b: built.append(b) or joined(b)).collect()] == [1]
    assert (len(built), template.moves) == (5, 1)
