"""The sink's stray task attempts: a Spark task attempt that opened its transaction after its batch
was committed (the losing speculative copy, killed once the other attempt won, whose Python worker
still flushed) reports to nobody. Left open it would hold the partition's last stable offset for
the tasks' ``transaction.timeout.ms`` (15 minutes), and no ``read_committed`` reader, the riverlog
source included, would see any later batch; the next batch's commit aborts it."""
from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, StructField, StructType

from broker.client import AdminClient, NewTopic, TopicPartition
from broker.client.exactly_once import ONGOING
from spark_sink.writer import StreamWriter
from tests.conftest import wait_until
from tests.integration.test_exactly_once import values

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(120)]


def rows(lo: int, hi: int):
    return [pa.record_batch({"value": [str(i).encode() for i in range(lo, hi)]})]


def test_a_speculative_attempt_that_opened_after_its_batch_committed_does_not_hold_later_batches(spark_broker):
    servers, topic, sink = spark_broker.bootstrap, "sink-stray-speculative", "stray-query"
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.create_topics([NewTopic(topic, 1)])[topic].result(30)
    writer = StreamWriter({"riverlog.bootstrap.servers": servers, "topic": topic}, StructType(
        [StructField("value", BinaryType())]))
    assert writer.options.producer_config("t")["transaction.timeout.ms"] == 900_000

    # Batches 0 and 1 of one run (Spark's runId): batch 1's tasks skip the replay check.
    writer.commit([writer.write_partition(rows(0, 3), sink, 0, 0, 10, True, run_id="run-1")], 0)
    winner = writer.write_partition(rows(3, 5), sink, 1, 0, 11, True, run_id="run-1")
    writer.commit([winner], 1)
    # The losing copy of batch 1's task (taskAttemptId 12) writes after the commit; Spark drops its message.
    loser = writer.write_partition(rows(50, 55), sink, 1, 0, 12, True, run_id="run-1")
    assert loser.attempt is not None and not loser.skipped
    writer.commit([writer.write_partition(rows(5, 8), sink, 2, 0, 13, True, run_id="run-1")], 2)

    wait_until(lambda: values(servers, topic) == list(range(8)), 20, 0.05,
               "read_committed sees batch 2 (a stray of batch 1 would hold it for 15 minutes)")
    with AdminClient({"bootstrap.servers": servers}) as admin:
        assert admin.list_transactions(30, states=[ONGOING], prefix=f"{sink}-").result() == []
        tp = TopicPartition(topic, 0)
        producers = admin.describe_producers([tp])[tp].result(30)
    assert producers.open_transactions == [] and producers.last_stable_offset == producers.high_watermark
