"""``StreamsApp``: a topology running as Structured Streaming queries, one per sub-topology — Kafka
Streams' ``KafkaStreams``.

Each query reads its sub-topology's topics with ``format("riverlog")`` and writes with
``writeStream.format("riverlog")``: the batch's output records, its changelog entries and its input
offsets (the sink's ``groupId``: committed to the consumer group ``application.id`` from Spark's
offset log) go in **one exactly-once write**, so the broker holds exactly the state behind the
committed output (``at_least_once``: a ``foreachBatch`` write, the offsets committed after it). Spark's
checkpoint (``state.dir``) is the fast path; without it the application **restarts from the broker alone**:
pending batches finished, state rebuilt from the changelogs, inputs resumed at the committed
offsets, under a new *generation* of exactly-once owner ids (batch ids restart with a new checkpoint).

The config is checked in :mod:`streams.app_config`, the topics made in :mod:`streams.internal_topics`,
the generations kept in :mod:`streams.generations`, a query's checkpoint judged in
:mod:`streams.query_checkpoint`, a fresh query's offsets chosen in :mod:`streams.starting_offsets`
and the lifecycle (states, listener, failed queries, close) ruled in :mod:`streams.app_lifecycle`;
this module starts and runs the queries.
"""
from __future__ import annotations

import json
import os
import sys

from broker.client import Consumer, TopicPartition
from spark_sink import activate_in_thread
from spark_sink.offset_log import topic_offsets
from streams import count_combine, partition_time, restore, spark_plan, table_combine, window_combine
from streams.app_lifecycle import ApplicationLifecycle
from streams.app_config import _ADMIN, _CONSUMER, _MAIN_CONSUMER, _PRODUCER, _client, _config
from streams.errors import StreamsError
from streams.generations import Generations
from streams.global_table import global_topics
from streams.internal_topics import InternalTopics
from streams.query_checkpoint import (  # noqa: F401 - _committed_a_batch stays importable from here
    OWNER_FILE, _PLACEMENT, QueryCheckpoints, _committed_a_batch, _placement)
from streams.repartition_purge import RepartitionPurger
from streams.interpreter import AT_LEAST_ONCE, EXACTLY_ONCE_V2, check_serdes, default_serdes, task_policy
from streams.spark_task import OUTPUT_DDL, TaskProcessor, stateless_batches, task_input
from streams.starting_offsets import StartingOffsets
from streams.task_placement import is_identity, key_column
from streams.topology import SubTopology, Topology, changelog_topic


class StreamsApp(ApplicationLifecycle, InternalTopics, Generations, QueryCheckpoints, StartingOffsets):
    def __init__(self, topology: Topology, spark, config: dict):
        self.spark = spark
        self.config = _config(config)
        self.app = self.config["application.id"]
        self.defaults = default_serdes(self.config)
        self.policy = task_policy(self.config)
        # a sub-topology whose sources' extractors read the partition time keeps it (with its meta)
        self.topology = partition_time.with_default_extractor(topology, self.policy.timestamp_extractor)
        check_serdes(topology, self.defaults)
        from streams.global_table import check_global_on_spark
        from streams.joins import refuse_on_spark
        refuse_on_spark(topology)
        check_global_on_spark(topology)
        self.queries = []
        self._subs: list[SubTopology] = []
        self.purger: RepartitionPurger | None = None
        self._partitions: dict[str, int] = {}
        self._copartitioned: dict[str, int] = {}
        self._init_lifecycle()

    @property
    def client(self) -> dict:
        return {"bootstrap.servers": self.config["bootstrap.servers"]}

    @property
    def admin(self) -> dict:
        """The admin client's config: ``admin.``-prefixed settings over the bootstrap servers."""
        return {**self.client, **_client(self.config, _ADMIN)}

    @property
    def decode_in_spark(self) -> bool:
        """Whether Spark may decode the sources (the SQL prefix, the combining steps): only with
        Kafka's default deserialization handler and timestamp extractor, which fail on what they
        cannot read; another handler or extractor needs every record in the Python source."""
        from streams.parameters import FailOnInvalidTimestamp
        return not self.policy.deserialization.CONTINUE and \
            type(self.policy.timestamp_extractor) is FailOnInvalidTimestamp

    def _default_timestamped(self, sub: SubTopology) -> set[str]:
        """The topics of ``sub`` whose records keep their own timestamp (no extractor of their own)."""
        from streams.pattern_sources import node_topics
        return {self.topology.topic(self.app, n, t) for n in sub.sources if not n.internal
                for t in node_topics(self.topology, n)
                if getattr(n.args.get("consumed"), "timestamp_extractor", None) is None}

    def _default_timestamped_patterns(self, sub: SubTopology) -> list[str]:
        """The patterns of ``sub``'s pattern sources keeping their records' own timestamps."""
        return [n.args["pattern"].pattern for n in sub.sources if n.args.get("pattern") is not None
                and getattr(n.args.get("consumed"), "timestamp_extractor", None) is None]

    def describe(self):
        from streams.topology import TopologyDescription
        combines = {s.id: self._combine(s) for s in self.topology.subtopologies}
        return TopologyDescription(self.topology, self.app,
                                   {i: c.DESCRIPTION for i, c in combines.items() if c is not None},
                                   self.decode_in_spark)

    def _combine(self, sub: SubTopology):
        """How the sub-topology's rows are combined before its task (a windowed count per window,
        a count per key, a cached source table per key), or None."""
        if not self.decode_in_spark or global_topics(self.topology, sub):
            return None
        cache = self.config["statestore.cache.max.bytes"]
        p = spark_plan.plan(sub)
        if p.source is not None:    # SQL steps run in Spark first
            return (window_combine.combinable(sub, self.defaults, cache, p)
                    or count_combine.combinable(sub, self.defaults, cache, p))
        return (window_combine.combinable(sub, self.defaults, cache)
                or count_combine.combinable(sub, self.defaults, cache)
                or table_combine.combinable(sub, self.defaults, cache))

    # ------------------------------------------------------------------ queries
    def _start(self, sub: SubTopology):
        topics = self.topology.source_topics(self.app, sub)
        ckpt = self._checkpoint(sub)
        owner_file = os.path.join(ckpt, OWNER_FILE)
        fresh, owner = self._claim(sub)
        reader = (self.spark.readStream.format("riverlog")
                  .option("riverlog.bootstrap.servers", self.config["bootstrap.servers"])
                  .option("includeHeaders", "true"))
        from streams.pattern_sources import subscription
        pattern = subscription(self.topology, self.app, sub)
        reader = (reader.option("subscribePattern", pattern) if pattern is not None
                  else reader.option("subscribe", ",".join(topics)))
        for k, v in _client(self.config, _CONSUMER, _MAIN_CONSUMER).items():
            reader = reader.option(f"riverlog.{k}", str(v))
        if "maxOffsetsPerTrigger" in self.config:
            reader = reader.option("maxOffsetsPerTrigger", str(self.config["maxOffsetsPerTrigger"]))
            # Kafka's global thread keeps a global store caught up, unsynchronised with the stream tasks
            globals_ = global_topics(self.topology, sub)
            reader = reader.option("unlimitedTopics", ",".join(sorted(globals_)))
            # a task's partitions are applied in timestamp order (Kafka merges them by timestamp), so
            # a batch cut by the limit is cut at one timestamp across the task's topics
            reader = reader.option("alignByTimestamp", str(len(set(topics) - globals_) > 1).lower())
        if fresh:
            reader = reader.option("startingOffsets", json.dumps(self._committed(topics)))
            os.makedirs(ckpt, exist_ok=True)
            if os.path.exists(os.path.join(ckpt, "offsets")):
                raise StreamsError(f"checkpoint {ckpt} has offsets but no owner file; delete the directory")
        df = reader.load()
        p = spark_plan.plan(sub, self.decode_in_spark)
        combine = self._combine(sub) if sub.stateful and p.sink is None else None
        if (p.source is not None or combine is not None) and (
                self._default_timestamped(sub) or self._default_timestamped_patterns(sub)):
            df = spark_plan.fail_on_invalid_timestamp(df, self._default_timestamped(sub),
                                                      self._default_timestamped_patterns(sub))
        partitions, keys = (_placement(ckpt, self.tasks(self.topology.subtopologies[sub.id]), fresh)
                            if sub.stateful else (None, ()))
        if p.source is not None:
            df = spark_plan.apply(df, p, self.defaults)
        if p.sink is not None:
            out = spark_plan.sink_columns(df, p, self.defaults, self.app)
        elif sub.stateful:
            init = (restore.initial_state(self.spark, self.config["bootstrap.servers"], self.app, sub, keys)
                    if fresh and restore.has_state(self.client, self.app, sub, self.partitions) else None)
            if isinstance(combine, window_combine.Combine):
                df = window_combine.combined(df, combine)
            elif isinstance(combine, count_combine.KeyCount):
                df = count_combine.combined(df, combine)
            elif combine is not None:
                df = table_combine.combined(df, combine)
                combine = None      # the task applies the rows kept as any others
            out = task_input(self._to_tasks(df, sub, keys)).groupBy("partition").transformWithState(
                TaskProcessor(self.topology, sub.id, self.app, self.defaults, p.entry,
                              self.config["statestore.cache.max.bytes"], keys, combine, self.policy),
                OUTPUT_DDL, "Append", "None", initialState=init)
        else:
            out = df.mapInArrow(stateless_batches(self.topology, sub.id, self.app, self.defaults, p.entry,
                                                  self.policy),
                                OUTPUT_DDL)
        writer = (out.writeStream.queryName(f"{self.app}-subtopology-{sub.id}")
                  .option("checkpointLocation", ckpt)
                  .trigger(processingTime=f"{self.config['commit.interval.ms']} milliseconds"))
        if self.config["processing.guarantee"] == EXACTLY_ONCE_V2:
            writer = (writer.format("riverlog").option("riverlog.bootstrap.servers", self.config["bootstrap.servers"])
                      .option("sinkId", owner).option("groupId", self.config["application.id"]))
            for k, v in _client(self.config, _PRODUCER).items():
                writer = writer.option(f"riverlog.{k}", str(v))
            activate_in_thread(self.spark)
        else:
            writer = writer.foreachBatch(_AtLeastOnceWriter(self.config, ckpt))
        if sub.stateful:
            conf = {_PROVIDER: _ROCKSDB}
            if fresh:   # a checkpoint keeps the count of its first start, and its keys
                conf[_SHUFFLE_PARTITIONS] = str(partitions)
                with open(os.path.join(ckpt, _PLACEMENT), "w") as f:
                    json.dump({"partitions": partitions, "keys": list(keys)}, f)
            query = _start_with(self.spark, writer, conf)
        else:
            query = writer.start()
        if fresh:
            with open(owner_file, "w") as f:
                f.write(owner)
        return query

    def _claim(self, sub: SubTopology) -> tuple[bool, str]:
        """(fresh, exactly-once owner id) of ``sub``'s query: an unusable checkpoint is discarded
        first; without a checkpoint the query takes a new generation, else it keeps the checkpoint's."""
        self._discard_unusable_checkpoint(sub)
        owner_file = os.path.join(self._checkpoint(sub), OWNER_FILE)
        if not os.path.exists(owner_file):
            return True, self._owner(sub, self._next_generation(sub))
        with open(owner_file) as f:
            return False, f.read().strip()

    def _to_tasks(self, df, sub: SubTopology, keys: tuple[int, ...]):
        """Rows grouped by task: a task's own partition, and every row of a global table's topic
        copied to each task; column ``partition`` becomes the task's placement key
        (:mod:`streams.task_placement`), ``source_partition`` keeps where the row came from."""
        from pyspark.sql import functions as F
        globals_ = sorted(global_topics(self.topology, sub))
        if not globals_ and is_identity(keys):
            return df
        df = df.withColumn("source_partition", F.col("partition"))
        if globals_:
            n = self.tasks(self.topology.subtopologies[sub.id])
            is_global = F.col("topic").isin(*globals_)
            df = df.withColumn("partition", F.explode(F.when(is_global, F.sequence(F.lit(0), F.lit(n - 1)))
                                                      .otherwise(F.array(F.col("partition")))))
        return df if is_identity(keys) else df.withColumn("partition", F.expr(key_column(keys)))

    def _start_queries(self) -> None:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        self._create_internal_topics()
        self._subs = list(self.runnable())
        with self._generations_read_once():
            for sub in self._subs:
                self.queries.append(self._start(sub))
        readers = [(self._checkpoint(sub), {self.topology.topic(self.app, n, t) for n in sub.sources if n.internal
                                            for t in n.topics}) for sub in self._subs]
        self.purger = RepartitionPurger(self.client, [r for r in readers if r[1]],
                                        self.config["repartition.purge.interval.ms"]).start()

    def _restart_query(self, i: int) -> None:
        """Start sub-topology ``i``'s query again (its failed batch is replayed from the checkpoint)."""
        with self._generations_read_once():
            self.queries[i] = self._start(self._subs[i])

    def _stop_queries(self) -> None:
        if self.purger is not None:
            self.purger.close()
            self.purger = None
        queries, self.queries = self.queries, []
        for q in queries:
            q.stop()

    def processAllAvailable(self, rounds: int = 50) -> None:
        """Process until no query has input left (a repartition topic feeds the next query, so
        repeat). A query that fails is answered by the uncaught exception handler here, as by the
        watcher: replaced, the processing goes on; otherwise the query's exception (Spark's
        ``StreamingQueryException``) is raised, here and by every later call."""
        for _ in range(rounds):
            self._check_not_failed()
            queries = list(self.queries)
            before = [q.lastProgress["batchId"] if q.lastProgress else -1 for q in queries]
            for q in queries:
                try:
                    q.processAllAvailable()
                except Exception:
                    self._query_failed(q)
                    if not self.state().isRunningOrRebalancing():
                        raise
                    break
            else:
                after = [q.lastProgress["batchId"] if q.lastProgress else -1 for q in queries]
                if before == after:
                    return

    # ------------------------------------------------------------------ interactive queries
    def store(self, query):
        """An interactive query: a store read from its committed changelog, asked for by name or,
        as in Kafka, by :class:`~streams.store_query.StoreQueryParameters` (its type picks the
        view, its partition one task's part). Read in any state once the changelog exists (so
        from any process that can reach the broker). An unknown name raises
        ``UnknownStateStoreError``; a type that does not fit the store, ``InvalidStateStoreError``;
        a partition the store does not have, ``InvalidStateStorePartitionError``; a changelog not
        made yet, ``StreamsNotStartedError`` before ``start()`` and ``InvalidStateStoreError`` after."""
        from streams.errors import InvalidStateStoreError, StreamsNotStartedError, UnknownStateStoreError
        from streams.global_table import global_stores
        from streams.interactive import read_store
        from streams.store_query import StoreQueryParameters
        params = query if isinstance(query, StoreQueryParameters) else None
        name = params.storeName() if params is not None else query
        spec = self.topology.stores().get(name)
        if spec is None:
            raise UnknownStateStoreError(f"Cannot get state store {name} because no such store is registered in "
                                         f"the topology.")
        wanted = params.queryableStoreType() if params is not None else None
        # a versioned store is no ReadOnlyKeyValueStore: Kafka's IQv1 types refuse it (served by name only)
        kind = "versioned keyValue" if wanted is not None and _versioned(self.topology, name) else spec.kind
        if wanted is not None and not wanted.accepts(kind):
            raise InvalidStateStoreError(f"Cannot get state store {name} because the queryable store type "
                                         f"[{wanted}] does not accept the actual store type [{kind} store].")
        partition = params.partition() if params is not None else None
        topic = changelog_topic(self.app, name)
        try:
            return read_store(self.client, topic, spec,
                              only=0 if name in global_stores(self.topology) else partition,
                              key_serde=spec.key_serde or self.defaults[0],
                              timestamped=wanted is not None and wanted.timestamped)
        except KeyError:
            if self.state().hasNotStarted():
                raise StreamsNotStartedError(f"KafkaStreams has not been started, you can retry after calling "
                                             f"start() (store {name!r} has no changelog topic {topic!r} yet)") from None
            raise InvalidStateStoreError(f"store {name!r} has no changelog topic {topic!r}: it was deleted, or "
                                         f"the application did not start") from None


def _versioned(topology, store: str) -> bool:
    """Whether ``store`` is a versioned table's (``Stores.persistentVersionedKeyValueStore``)."""
    return any(n.args.get("versioned") and any(s.name == store for s in n.stores) for n in topology.nodes)


_PROVIDER = "spark.sql.streaming.stateStore.providerClass"
_ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
_SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


def _start_with(spark, writer, conf: dict):
    """Start a query with ``conf`` (transformWithState needs the RocksDB state store; the state
    partitions give each task its own, :mod:`streams.task_placement`). A query keeps the conf it
    started with (Spark clones the session for it), so the user's settings are restored at once."""
    before = {k: spark.conf.get(k, None) for k in conf}
    for k, v in conf.items():
        spark.conf.set(k, v)
    try:
        return writer.start()
    finally:
        for k, v in before.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


class _AtLeastOnceWriter:
    """``foreachBatch`` of ``at_least_once``: the batch's rows, then its input offsets committed."""
    def __init__(self, config: dict, checkpoint: str):
        self.config, self.checkpoint = config, checkpoint

    def __call__(self, df, batch_id: int) -> None:
        w = (df.write.format("riverlog").mode("append")
             .option("riverlog.bootstrap.servers", self.config["bootstrap.servers"])
             .option("deliveryGuarantee", "at-least-once"))
        for k, v in _client(self.config, _PRODUCER).items():
            w = w.option(f"riverlog.{k}", str(v))
        w.save()
        offsets = topic_offsets(self.checkpoint, batch_id)
        if not offsets:
            return
        c = Consumer({"bootstrap.servers": self.config["bootstrap.servers"],
                      "group.id": self.config["application.id"], "enable.auto.commit": False})
        try:
            c.commit(offsets=[TopicPartition(t, p, o) for t, p, o in offsets], asynchronous=False)
        finally:
            c.close()
