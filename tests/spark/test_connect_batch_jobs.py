"""What a connector's micro-batch costs in Spark jobs, on small local frames (no broker): under
``errors.tolerance=none`` the flagged records are not scanned before the write (the write's own job
fails, naming the record), and a JSON converter's inferred type is carried to later batches, with
a record that does not fit it flagged for a rebind instead of inferring again every batch."""
import pytest

from connect import record_frame
from connect.config import parse_connector_config
from connect.converters import JSON_CONVERTER, JsonConverter, decode
from connect.errors import DataError
from connect.pipeline import apply_tolerance, translated

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
