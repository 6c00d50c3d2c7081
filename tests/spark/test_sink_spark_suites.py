"""Edge cases of Spark's KafkaSinkSuite and of the ``KafkaProducer.send`` checks its rows pass
through, for the riverlog sink, driven through the writer's own calls (one task, then the driver's
commit) against a real broker."""
from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, IntegerType

from tests.spark.test_sink import make_topic, read_all
from tests.spark.test_sink_kafka_fidelity import schema, write

pytestmark = [pytest.mark.spark, pytest.mark.integration]


def test_a_partition_the_topic_does_not_have_fails_the_write_and_nothing_of_it_commits(spark_broker):
    """``KafkaProducer.send`` refuses a record for a partition past the topic's last ("Invalid
    partition given with record: 5 is not in the range [0...2)."), which fails Spark's Kafka sink's
    task: the write fails, naming the partition, and none of its rows commit."""
    topic = make_topic(spark_broker, "suites-partition-too-large", 2)
    batch = pa.record_batch({"value": [b"a", b"b", b"c"], "partition": pa.array([0, 5, 1], pa.int32())})
    with pytest.raises(Exception, match=r"has 2 partition\(s\); partition 5 does not exist"):
        write(spark_broker, topic, schema(value=BinaryType(), partition=IntegerType()), batch)
    assert read_all(spark_broker, topic, "read_uncommitted", partitions=2) == []
