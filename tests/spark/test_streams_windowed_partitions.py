"""On Spark, a sink of windowed keys partitions as Kafka's ``WindowedStreamPartitioner``: every
window of a key in the partition of the inner key's bytes (the task asks the output topic's
partition count once), where the producer would hash the whole windowed key."""
from __future__ import annotations

import pytest

from broker.client import Producer, murmur2
from streams.builder import StreamsBuilder
from streams.parameters import Consumed
from streams.serdes import Serdes
from streams.serdes_windowed import WindowedSerdes
from streams.windows import TimeWindows
from tests.spark.test_sink import make_topic, read_all

pytestmark = [pytest.mark.spark, pytest.mark.integration]

BASE = 1_700_000_000_000
OUT_PARTITIONS = 6


@pytest.mark.timeout(300)
def test_windows_of_a_key_land_in_the_partition_of_the_inner_key(spark, spark_broker, tmp_path):
    from streams.app import StreamsApp
    servers = spark_broker.bootstrap
    source, out = make_topic(spark_broker, "wp-in", 1), make_topic(spark_broker, "wp-out", OUT_PARTITIONS)
    s = Serdes.String()
    b = StreamsBuilder()
    (b.stream(source, Consumed.with_(s, s)).groupByKey().windowedBy(TimeWindows.ofSizeWithNoGrace(1_000))
     .count().toStream().to(out))      # the table's TimeWindowedSerde travels to the sink
    with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
        for i in range(10):
            p.produce(source, key=b"user-7", value=b"x", timestamp=BASE + 1_000 * i, partition=0)
        p.flush(30)
    app = StreamsApp(b.build(), spark, {"application.id": "wp-app", "bootstrap.servers": servers,
                                        "state.dir": str(tmp_path / "state")})
    app.start()
    try:
        app.processAllAvailable()
    finally:
        app.close()
    serde = WindowedSerdes.timeWindowedSerdeFrom(s, 1_000)
    got = [(serde.deserialize(k), partition) for k, _, _, partition in read_all(spark_broker, out,
                                                                                partitions=OUT_PARTITIONS)]
    assert sorted(w.start for w, _ in got) == [BASE + 1_000 * i for i in range(10)]
    assert {partition for _, partition in got} == {murmur2(b"user-7", OUT_PARTITIONS)}
