"""``make demo``: an embedded broker, a Structured Streaming aggregation from one topic to another.

Sample click events go into ``clicks``; a streaming query reads them with ``format("riverlog")``,
counts clicks per user per minute (event time, 10 s watermark) and writes the counts to
``clicks-per-minute`` through the exactly-once sink; the results are read back and printed.

    python -m spark_source.demo
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time


def produce_clicks(servers: str, n: int = 600) -> None:
    from broker.client import Producer
    start = int(time.time() // 60 * 60 - 180) * 1000  # three whole minutes ago
    with Producer({"bootstrap.servers": servers}) as p:
        for i in range(n):
            user = f"user-{i % 4}"
            p.produce("clicks", key=user, value=json.dumps({"page": f"/p/{i % 7}"}),
                      timestamp=start + i * 300)  # one click every 0.3 s of event time, over 3 minutes
        p.flush(30)


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    import spark_source
    from broker.client import OFFSET_BEGINNING, AdminClient, Consumer, NewTopic, TopicPartition
    from broker.embedded import EmbeddedBroker

    # Spark first: its JVM is started by forking this process, best done before the broker's threads run.
    spark = (SparkSession.builder.master("local[2]").appName("riverlog-demo")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark_source.register(spark)
    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory(prefix="riverlog-demo-") as tmp:
        servers = broker.bootstrap_servers
        print(f"embedded broker on {servers}")
        with AdminClient({"bootstrap.servers": servers}) as admin:
            for name, parts in (("clicks", 2), ("clicks-per-minute", 1)):
                admin.create_topics([NewTopic(name, parts)])[name].result()
        produce_clicks(servers)
        print("produced 600 click events to 'clicks'")

        events = (spark.readStream.format("riverlog")
                  .option("riverlog.bootstrap.servers", servers)
                  .option("subscribe", "clicks")
                  .option("startingOffsets", "earliest")
                  .option("maxOffsetsPerTrigger", 200)
                  .option("groupId", "clicks-dashboard")
                  .load())
        counts = (events.selectExpr("CAST(key AS STRING) AS user", "timestamp")
                  .withWatermark("timestamp", "10 seconds")
                  .groupBy(F.window("timestamp", "1 minute"), "user").count())
        # Python data source sinks take append only; updated counts go through foreachBatch, which
        # with sinkId and batchId is as exactly-once as writeStream.format("riverlog") itself.
        def write_counts(df, batch_id):
            (df.selectExpr("CAST(user AS BINARY) AS key", "CAST(to_json(struct(*)) AS BINARY) AS value")
             .write.format("riverlog").option("riverlog.bootstrap.servers", servers)
             .option("topic", "clicks-per-minute").option("sinkId", "clicks-per-minute")
             .option("batchId", batch_id).mode("append").save())

        query = (counts.writeStream.foreachBatch(write_counts)
                 .option("checkpointLocation", os.path.join(tmp, "checkpoint"))
                 .outputMode("update").trigger(availableNow=True).start())
        query.awaitTermination()
        print(f"the streaming query ran {len(query.recentProgress)} micro-batch(es)")
        spark.stop()

        consumer = Consumer({"bootstrap.servers": servers, "isolation.level": "read_committed"})
        consumer.assign([TopicPartition("clicks-per-minute", 0, OFFSET_BEGINNING)])
        latest: dict = {}
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            msgs = consumer.consume(1000, 0.5)
            if not msgs and latest:
                break
            for m in msgs:
                row = json.loads(m.value())
                latest[(row["window"]["start"], row["user"])] = row["count"]
        consumer.close()
        print("clicks per user per minute (read back from 'clicks-per-minute', read_committed):")
        for (window, user), count in sorted(latest.items()):
            print(f"  {window}  {user:8s} {count:4d}")
        print(f"{sum(latest.values())} clicks counted")


if __name__ == "__main__":
    main()
