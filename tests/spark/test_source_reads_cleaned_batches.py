"""A Spark task's read (``read_slice``, no SparkSession) over a compacted partition whose cleaned
log holds a producer's emptied last batch and a batch cut short: the task reads the surviving
records and ends, also for a range that holds no record at all."""
from __future__ import annotations

import pytest

import glob
import os

from broker.client import Producer
from broker.records.batch import iter_headers
from spark_source.planning import Slice
from spark_source.reader import read_slice
from tests.conftest import wait_until
from tests.integration.test_retention_compaction import QUICK, cleaned_up_to_the_active_segment, create_topic
from tests.spark.test_source_kafka_fidelity import options

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def offsets_read(servers: str, topic: str, start: int, until: int) -> list[int]:
    o = options(servers, streaming=False, subscribe=topic, **{"kafkaConsumer.pollTimeoutMs": "5000"})
    return [o for batch in read_slice(o, Slice(topic, 0, start, until)) for o in batch.column("offset").to_pylist()]


def test_a_task_reads_past_a_producer_s_emptied_last_batch(broker_factory, topic_name):
    broker = broker_factory(QUICK)
    servers = broker.bootstrap
    create_topic(servers, topic_name, cleanup_policy="compact", segment_bytes=100, min_cleanable_dirty_ratio=0.0)
    with Producer({"bootstrap.servers": servers, "acks": "all", "linger.ms": 0}) as idempotent:
        idempotent.produce(topic_name, value=b"first", key=b"k0", partition=0)
        idempotent.produce(topic_name, value=b"first", key=b"k1", partition=0)
        assert idempotent.flush(30) == 0                      # offsets 0-1, one batch
        with Producer({"bootstrap.servers": servers, "acks": "1", "linger.ms": 0}) as plain:
            for i, key in enumerate((b"k0", b"k1", b"filler")):
                plain.produce(topic_name, value=b"later %d" % i, key=key, partition=0)
                assert plain.flush(30) == 0                    # offsets 2, 3, 4: a segment each
        wait_until(lambda: cleaned_up_to_the_active_segment(broker.data_dir, topic_name), 60, 0.1, "a clean")
    stored = [h for path in sorted(glob.glob(os.path.join(broker.data_dir, f"{topic_name}-0", "*.log")))
              for _, h in iter_headers(read_file(path))]
    assert [(h.base_offset, h.record_count) for h in stored if h.producer_id >= 0][-1][1] == 0   # emptied
    assert offsets_read(servers, topic_name, 0, 2) == []       # the emptied batch only: the task ends
    assert offsets_read(servers, topic_name, 0, 5) == [2, 3, 4]
    assert offsets_read(servers, topic_name, 1, 4) == [2, 3]
