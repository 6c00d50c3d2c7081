"""The sink's groupId / groupOffsets options (a micro-batch's input offsets, committed in its
exactly-once batch: given on a foreachBatch write, read from the offset log on a streaming one):
parsed once, refused where they cannot be exactly-once."""
from __future__ import annotations

import json
import pickle

import pytest

from broker.client import TopicPartition
from broker.errors import InvalidConfigError
from spark_sink import offset_log
from spark_sink.options import SinkOptions

pytestmark = pytest.mark.unit

BASE = {"riverlog.bootstrap.servers": "127.0.0.1:1", "topic": "out", "sinkId": "app", "batchId": "7"}


def parse(**options) -> SinkOptions:
    return SinkOptions.parse({**BASE, **options})


def test_group_offsets_in_the_sources_offset_format_become_the_clients_offsets():
    opts = parse(groupId="app-in", groupOffsets='{"orders": {"1": 5, "0": 42}, "clicks": {"0": 0}}')
    assert opts.group_id == "app-in"
    assert opts.group_offsets == (("clicks", 0, 0), ("orders", 0, 42), ("orders", 1, 5))
    assert opts.offsets(7) == [TopicPartition("clicks", 0, 0), TopicPartition("orders", 0, 42),
                              TopicPartition("orders", 1, 5)]
    assert pickle.loads(pickle.dumps(opts)) == opts                  # the writer travels to executors
    # Option names are case-insensitive, as Spark's.
    assert SinkOptions.parse({**BASE, "GROUPID": "g", "groupoffsets": '{"a": {"0": 1}}'}).group_id == "g"


def test_without_them_nothing_changes():
    opts = parse()
    assert opts.group_id is None and opts.group_offsets is None and opts.offsets(7) is None


def test_the_offsets_transaction_lives_as_long_as_the_tasks():
    assert parse().transaction_timeout_ms == 900_000
    assert parse(**{"riverlog.transaction.timeout.ms": "120000"}).transaction_timeout_ms == 120_000


@pytest.mark.parametrize("options, named, says", [
    ({"groupId": "g"}, "groupOffsets", "needs 'groupOffsets'"),     # a foreachBatch write names its offsets
    ({"groupOffsets": '{"a": {"0": 1}}'}, "groupId", "needs 'groupId'"),
    ({"groupId": " ", "groupOffsets": '{"a": {"0": 1}}'}, "groupId", "non-empty"),
    ({"groupId": "g", "groupOffsets": '{"a": {"0": 1}}', "deliveryGuarantee": "at-least-once"}, "groupId",
     "exactly-once"),
    ({"groupId": "g", "groupOffsets": "{not json"}, "groupOffsets", "is not JSON"),
    ({"groupId": "g", "groupOffsets": "{}"}, "groupOffsets", "names no topic"),
    ({"groupId": "g", "groupOffsets": "[1]"}, "groupOffsets", "names no topic"),
    ({"groupId": "g", "groupOffsets": '{"a": {}}'}, "groupOffsets", "no partitions for topic 'a'"),
    ({"groupId": "g", "groupOffsets": '{"a": [0]}'}, "groupOffsets", "no partitions for topic 'a'"),
    ({"groupId": "g", "groupOffsets": '{"a": {"x": 1}}'}, "groupOffsets", "not a partition number"),
    ({"groupId": "g", "groupOffsets": '{"a": {"0": -2}}'}, "groupOffsets", "not a next offset"),
    ({"groupId": "g", "groupOffsets": '{"a": {"0": 1.5}}'}, "groupOffsets", "not a next offset"),
    ({"groupId": "g", "groupOffsets": '{"a": {"0": "3"}}'}, "groupOffsets", "not a next offset"),
    ({"groupId": "g", "groupOffsets": '{"a": {"0": 1, "00": 2}}'}, "groupOffsets", "a partition twice"),
])
def test_bad_group_options_fail_at_parse_naming_the_option(options, named, says):
    with pytest.raises(InvalidConfigError, match=says) as caught:
        parse(**options)
    assert caught.value.details["config"] == named


def test_given_offsets_need_a_batch_id():
    no_batch = {k: v for k, v in BASE.items() if k != "batchId"}
    with pytest.raises(InvalidConfigError, match="'sinkId' and 'batchId'") as caught:
        SinkOptions.parse({**no_batch, "groupId": "g", "groupOffsets": '{"a": {"0": 1}}'})
    assert caught.value.details["config"] == "groupOffsets"


# ------------------------------------------------------------------------------ a streaming write's groupId
STREAM = {k: v for k, v in BASE.items() if k != "batchId"}


def offset_log_of(tmp_path, batch: int, *sources: str, version: str = "v1") -> str:
    """A checkpoint whose offset log holds ``batch`` with these source lines, as Spark writes it."""
    (tmp_path / "offsets").mkdir(exist_ok=True)
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1, "conf": {}}
    (tmp_path / "offsets" / str(batch)).write_text("\n".join([version, json.dumps(meta), *sources]))
    return str(tmp_path)


def test_a_streaming_write_reads_each_batchs_offsets_from_its_offset_log(tmp_path):
    ckpt = offset_log_of(tmp_path, 3, '{"orders":{"1":5,"0":42},"empty":{}}')
    offset_log_of(tmp_path, 4, '{"orders":{"1":9,"0":42}}')
    opts = SinkOptions.parse({**STREAM, "groupId": "app", "checkpointLocation": ckpt})
    assert opts.group_id == "app" and opts.group_offsets is None
    assert opts.offsets(3) == [TopicPartition("orders", 0, 42), TopicPartition("orders", 1, 5)]
    assert opts.offsets(4) == [TopicPartition("orders", 0, 42), TopicPartition("orders", 1, 9)]
    assert SinkOptions.parse({**STREAM, "groupId": "app", "checkpointLocation": "file://" + ckpt}).offsets(3) == \
        opts.offsets(3)


def test_every_topic_shaped_source_of_the_batch_counts_and_others_are_left_out(tmp_path):
    ckpt = offset_log_of(tmp_path, 0, '{"a":{"0":1}}', "-", "17", '{"b":{"2":3},"a":{"1":4}}')
    assert offset_log.source_offsets(ckpt, 0) == [{"a": {"0": 1}}, None, 17, {"b": {"2": 3}, "a": {"1": 4}}]
    assert offset_log.topic_offsets(ckpt, 0) == (("a", 0, 1), ("a", 1, 4), ("b", 2, 3))
    # A batch that read nothing yet commits nothing.
    assert SinkOptions.parse({**STREAM, "groupId": "g", "checkpointLocation": offset_log_of(tmp_path, 1, "-")}
                             ).offsets(1) is None


def test_the_offset_log_in_sparks_format_v2_names_each_source_before_its_offset(tmp_path):
    """``spark.sql.streaming.offsetLog.formatVersion=2`` (Spark 4.1+) writes ``<source id>:<offset>``
    lines; read as v1 lines, every batch's commit failed on JSON that is not JSON."""
    ckpt = offset_log_of(tmp_path, 0, '0:{"a":{"0":1}}', "1:-", "orders:{\"b\":{\"2\":3}}", version="v2")
    assert offset_log.source_offsets(ckpt, 0) == [{"a": {"0": 1}}, None, {"b": {"2": 3}}]
    assert offset_log.topic_offsets(ckpt, 0) == (("a", 0, 1), ("b", 2, 3))
    with pytest.raises(InvalidConfigError, match="format 'v9'"):
        offset_log.source_offsets(offset_log_of(tmp_path, 1, '{"a":{"0":1}}', version="v9"), 1)


def test_a_streaming_write_without_a_checkpoint_location_is_told_to_set_one():
    opts = SinkOptions.parse({**STREAM, "groupId": "app"})
    with pytest.raises(InvalidConfigError, match="set checkpointLocation") as caught:
        opts.offsets(0)
    assert caught.value.details["config"] == "checkpointLocation"
    with pytest.raises(InvalidConfigError, match="not a local path"):
        SinkOptions.parse({**STREAM, "groupId": "app", "checkpointLocation": "s3a://b/ck"}).offsets(0)


# ------------------------------------------------------------------------------ transactionRecords
def committer_records(batch_id, options):
    """A transactionRecords function for the tests below."""
    return [("offsets", -1, b"batch", f"{batch_id}:{options['tag']}".encode())]


def test_transaction_records_name_a_function_given_the_batch_and_its_own_options():
    opts = parse(transactionRecords=f"{__name__}:committer_records", **{"transactionRecords.tag": "x"})
    assert opts.records_options == {"tag": "x"}
    assert opts.batch_records(7)() == [("offsets", -1, b"batch", b"7:x")]
    assert pickle.loads(pickle.dumps(opts)) == opts
    assert parse().batch_records(7) is None


@pytest.mark.parametrize("name, says", [
    ("no_module_here:f", "does not import"),
    (f"{__name__}", "'package.module:function'"),
    (f"{__name__}:missing", "'package.module:function'"),
    (f"{__name__}:BASE", "'package.module:function'"),
])
def test_a_transaction_records_option_that_names_no_function_fails_at_parse(name, says):
    with pytest.raises(InvalidConfigError, match=says) as caught:
        parse(transactionRecords=name)
    assert caught.value.details["config"] == "transactionRecords"


def test_transaction_records_need_exactly_once():
    with pytest.raises(InvalidConfigError, match="exactly-once") as caught:
        parse(transactionRecords=f"{__name__}:committer_records", deliveryGuarantee="at-least-once")
    assert caught.value.details["config"] == "transactionRecords"
