"""The DirectorySink's exactly-once naming against a second attempt at a batch that holds more
partitions than the first (the checkpoint lost after the write, before the group commit, while a
partition that was idle received records): each topic-partition's directory is named after where
the batch starts in it, so the second attempt replaces what the first wrote instead of adding a copy."""
from __future__ import annotations

import glob
import json
import os

import pytest

pytestmark = pytest.mark.spark

SCHEMA = ("topic string, partition int, offset long, timestamp timestamp, key binary, "
          "value struct<id: bigint, topic: string>, headers array<struct<key string, value binary>>")


def _records(spark, rows):
    return spark.createDataFrame([("orders", p, o, None, None, None if o % 7 == 6 else (o, f"t{p}"), [])
                                  for p, o in rows], SCHEMA)


def _written(path) -> list[tuple[str, int]]:
    out = []
    for name in glob.glob(os.path.join(path, "[!_]*", "*.json")):
        with open(name) as f:
            out += [(os.path.basename(os.path.dirname(name)), json.loads(line)["id"]) for line in f if line.strip()]
    return sorted(out)


def _sink(spark, path, fmt="jsonl"):
    from connect.config import parse_connector_config
    from connect.connector import ConnectorContext
    from connect.directory_sink import DirectorySink
    config = parse_connector_config({"name": "files", "connector.class": "DirectorySink", "topics": "orders",
                                     "path": str(path), "format": fmt})
    return DirectorySink(config, ConnectorContext(spark, "127.0.0.1:9"))


@pytest.mark.parametrize("told", [True, False], ids=["partitions-told", "partitions-unknown"])
def test_a_second_attempt_with_more_partitions_replaces_the_first(spark, tmp_path, told):
    """Told which partitions a batch holds, a batch of one is written without ``partitionBy``;
    either way the names and contents are the same."""
    sink = _sink(spark, tmp_path)
    sink.batch_start = {("orders", 0): 100, ("orders", 1): 10}
    sink.batch_partitions = (("orders", 1),) if told else ()
    sink.write_batch(sink.prepare(_records(spark, [(1, o) for o in range(10, 15)])), 4)  # partition 1 only
    first = _written(tmp_path)
    assert first == [("orders+1+00000000000000000010", o) for o in (10, 11, 12, 14)]  # 13: a tombstone
    # The same batch again (same starts), now holding partition 0 too and more of partition 1.
    sink.batch_partitions = (("orders", 0), ("orders", 1)) if told else ()
    both = [(0, o) for o in range(100, 106)] + [(1, o) for o in range(10, 18)]
    sink.write_batch(sink.prepare(_records(spark, both)), 0)
    again = _written(tmp_path)
    assert again == sorted([("orders+0+00000000000000000100", o) for o in range(100, 106) if o % 7 != 6]
                           + [("orders+1+00000000000000000010", o) for o in range(10, 18) if o % 7 != 6])
    assert [f for f in os.listdir(tmp_path) if f.startswith("_")] == []   # nothing hidden left behind
    # A later batch starts where this one ended: a directory of its own.
    sink.batch_start = {("orders", 0): 106, ("orders", 1): 18}
    sink.batch_partitions = (("orders", 1),) if told else ()
    sink.write_batch(sink.prepare(_records(spark, [(1, 18)])), 1)
    assert _written(tmp_path)[-1] == ("orders+1+00000000000000000018", 18)
    assert len(_written(tmp_path)) == len(again) + 1


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_a_batch_of_one_partition_with_nothing_to_write_leaves_no_directory(spark, tmp_path, fmt):
    """Tombstones only (or only an aborted transaction's offsets): no directory, as ``partitionBy``
    writes none for a value it never saw — and a later batch with records is written as usual."""
    sink = _sink(spark, tmp_path, fmt)
    sink.batch_start, sink.batch_partitions = {("orders", 0): 6}, (("orders", 0),)
    sink.write_batch(sink.prepare(_records(spark, [(0, 6), (0, 13)])), 0)  # both tombstones
    assert os.listdir(tmp_path) == []
    sink.batch_start = {("orders", 0): 14}
    sink.write_batch(sink.prepare(_records(spark, [(0, 14), (0, 15)])), 1)
    assert os.listdir(tmp_path) == ["orders+0+00000000000000000014"]
    ids = sorted(r.id for r in spark.read.format("json" if fmt == "jsonl" else "parquet")
                 .load(str(tmp_path / "orders+0+00000000000000000014")).collect())
    assert ids == [14, 15]
