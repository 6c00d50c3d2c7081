"""End-to-end latency through Spark: produce a record, a streaming query copies it from one topic to
another with ``Trigger.ProcessingTime("0 seconds")``, a ``read_committed`` consumer sees it.

One broker process, local[2], the exactly-once sink (and, for comparison, at-least-once). A
producer sends one record every 50 ms carrying its send time; the figure is the p50 (and p90) of
"seen by the consumer" minus "sent". Prints one JSON line per figure, with the load average and
the medians of Spark's own split of the micro-batches that carried records (``durationMs`` of the
query's progress: ``latestOffset``, ``walCommit`` (the offset log), ``queryPlanning``, ``addBatch``
(the tasks and the sink's commit), ``commitOffsets`` (the commit log), ``triggerExecution``, in ms).

    python bench/spark_latency_bench.py [--seconds 20] [--guarantees exactly-once,at-least-once]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from broker_bench import create_topic, emit, start_broker  # noqa: E402 - beside this file
from spark_source_bench import local_spark  # noqa: E402


def measure(spark, servers: str, guarantee: str, seconds: float, tmp: str) -> tuple[list[float], dict]:
    from broker.client import Consumer, Producer, TopicPartition
    src, dst = f"in-{guarantee}", f"out-{guarantee}"
    create_topic(servers, src, 1)
    create_topic(servers, dst, 1)
    query = (spark.readStream.format("riverlog").option("riverlog.bootstrap.servers", servers)
             .option("subscribe", src).option("startingOffsets", "latest").load()
             .selectExpr("value").writeStream.format("riverlog")
             .option("riverlog.bootstrap.servers", servers).option("topic", dst)
             .option("deliveryGuarantee", guarantee)
             .option("checkpointLocation", os.path.join(tmp, f"ckpt-{guarantee}"))
             .trigger(processingTime="0 seconds").start())
    consumer = Consumer({"bootstrap.servers": servers, "isolation.level": "read_committed",
                         "fetch.max.wait.ms": 10})
    consumer.assign([TopicPartition(dst, 0, 0)])
    latencies: list[float] = []
    stop = threading.Event()

    def feed():
        with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
            while not stop.is_set():
                p.produce(src, value=b"%.6f" % time.time())
                p.flush(5)
                time.sleep(0.05)

    while not query.recentProgress:  # the query is planned and running before the clock starts
        time.sleep(0.1)
    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    warm_until = time.monotonic() + 3
    end = time.monotonic() + seconds + 3
    while time.monotonic() < end:
        for m in consumer.consume(100, 0.05):
            if m.error() is None and time.monotonic() > warm_until:
                latencies.append(time.time() - float(m.value()))
    stop.set()
    feeder.join(5)
    batches = [p.durationMs for p in query.recentProgress if p.numInputRows and p.batchId >= 3]
    query.stop()
    consumer.close()
    split = {k: statistics.median(b.get(k, 0) for b in batches) for k in _SPLIT} if batches else {}
    return latencies, split


_SPLIT = ("latestOffset", "walCommit", "queryPlanning", "addBatch", "commitOffsets", "triggerExecution")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--guarantees", default="exactly-once,at-least-once")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="riverlog-latency-bench-") as tmp:
        proc, servers = start_broker(os.path.join(tmp, "broker"))
        spark = local_spark()
        try:
            for guarantee in args.guarantees.split(","):
                lat, split = measure(spark, servers, guarantee, args.seconds, tmp)
                lat.sort()
                if not lat:
                    emit(f"spark.end_to_end_latency_p50.{guarantee}", -1, "s", error="nothing arrived")
                    continue
                emit(f"spark.end_to_end_latency_p50.{guarantee}", statistics.median(lat), "s",
                     p90=round(lat[int(len(lat) * 0.9)], 3), records=len(lat), target=0.3,
                     load=round(os.getloadavg()[0], 2), spark_ms=split)
        finally:
            spark.stop()
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
