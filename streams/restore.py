"""A sub-topology's state rebuilt from the broker: its changelogs read back as the
``initialState`` of ``transformWithState`` when a query starts without Spark's checkpoint (the
application restarts from the broker alone, or moves to another machine)."""
from __future__ import annotations

from broker.client import Consumer, TopicPartition
from streams.spark_task import META_STORE, meta_changelog
from streams.task_placement import is_identity, key_column
from streams.topology import SubTopology, changelog_topic


def changelogs(app: str, sub: SubTopology) -> dict[str, str]:
    """Every changelog topic of ``sub`` with the store it restores."""
    out = {changelog_topic(app, s.name): s.name for s in sub.stores}
    out[meta_changelog(app, sub.id)] = META_STORE
    return out


def has_state(client: dict, app: str, sub: SubTopology, partitions) -> bool:
    """Whether any changelog of ``sub`` holds a record: a first start skips the restore query."""
    c = Consumer({**client, "group.id": f"{app}-restore-check", "enable.auto.commit": False})
    try:
        for t in changelogs(app, sub):
            for p in range(partitions(t)):
                low, high = c.get_watermark_offsets(TopicPartition(t, p), timeout=30)
                if high > low:
                    return True
        return False
    finally:
        c.close()


def initial_state(spark, bootstrap: str, app: str, sub: SubTopology, keys: tuple[int, ...] | None = None):
    """Every store's latest entry per key and task, from all the changelogs in one read (one
    scan and one shuffle, however many stores the sub-topology has), gathered into the state's
    buckets (:mod:`streams.state_buckets`: a row per bucket, so a restore writes each bucket once),
    grouped by task (under its placement key ``keys[task]``, :mod:`streams.task_placement`)."""
    from itertools import chain
    from pyspark.sql import Window, functions as F
    from streams.state_buckets import MIN_LEVEL, TARGET, bucket_column
    stores = changelogs(app, sub)
    df = (spark.read.format("riverlog").option("riverlog.bootstrap.servers", bootstrap)
          .option("subscribe", ",".join(sorted(stores))).option("startingOffsets", "earliest").load())
    names = F.create_map(*chain.from_iterable((F.lit(t), F.lit(n)) for t, n in sorted(stores.items())))
    w = Window.partitionBy("topic", "partition", "key").orderBy(F.col("offset").desc())
    latest = (df.withColumn("_n", F.row_number().over(w)).where("_n = 1 AND value IS NOT NULL")
              .select("partition", names[F.col("topic")].alias("store"), "key", "value"))
    # any level is right as long as the header says which; this one is about level_for(count)
    sized = (latest.withColumn("count", F.count(F.lit(1)).over(Window.partitionBy("partition", "store")))
             .withColumn("level", F.greatest(F.lit(MIN_LEVEL), F.ceil(F.log2(F.col("count") / TARGET))).cast("int")))
    buckets = (sized.withColumn("bucket", F.expr(bucket_column()))
               .groupBy("partition", "store", "level", "count", "bucket")
               .agg(F.collect_list(F.struct("key", "value")).alias("entries")))
    if keys is not None and not is_identity(keys):
        buckets = buckets.withColumn("partition", F.expr(key_column(keys)))
    return buckets.groupBy("partition")
