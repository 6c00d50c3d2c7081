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
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import tempfile

from broker.client import AdminClient, Consumer, ExactlyOnce, NewTopic, Producer, TopicPartition
from broker.errors import InvalidConfigError, TopicAlreadyExistsError
from spark_sink import activate_in_thread
from spark_sink.offset_log import topic_offsets
from streams import restore, spark_plan, table_combine, window_combine
from streams.errors import StreamsError, TopologyError
from streams.global_table import global_topics
from streams.repartition_purge import PURGE_INTERVAL_MS_DEFAULT, RepartitionPurger
from streams.interpreter import (AT_LEAST_ONCE, EXACTLY_ONCE_V2, at_least, check_serdes, default_serdes,
                                 streams_config, task_policy)
from streams.spark_task import OUTPUT_DDL, TaskProcessor, meta_changelog, stateless_batches, task_input
from streams.task_placement import identity, is_identity, key_column, placement_keys
from streams.topology import SubTopology, Topology, changelog_topic

log = logging.getLogger(__name__)

# Kafka's StreamsConfig keys Riverlog applies (the rest of StreamsConfig's keys are accepted and
# logged as not used, as Kafka's AbstractConfig.logUnused logs what no client read).
APPLIED = {
    "application.id", "bootstrap.servers", "processing.guarantee", "state.dir", "commit.interval.ms",
    "default.key.serde", "default.value.serde", "auto.offset.reset", "replication.factor",
    "maxOffsetsPerTrigger", "statestore.cache.max.bytes", "cache.max.bytes.buffering",
    "repartition.purge.interval.ms", "default.timestamp.extractor", "deserialization.exception.handler",
    "default.deserialization.exception.handler", "processing.exception.handler", "production.exception.handler",
    "default.production.exception.handler", "topology.optimization", "max.task.idle.ms",
}
# Kafka's client prefixes (StreamsConfig.*_PREFIX) that reach a client here (restore.consumer.,
# global.consumer.: restores and global tables read through Spark's source; logged as unused),
# and the settings Riverlog decides itself for each client.
_PRODUCER, _CONSUMER, _MAIN_CONSUMER, _ADMIN = "producer.", "consumer.", "main.consumer.", "admin."
_OWN = {_PRODUCER: {"bootstrap.servers", "transactional.id", "enable.idempotence", "acks"},
        _CONSUMER: {"bootstrap.servers", "group.id", "isolation.level", "auto.offset.reset", "enable.auto.commit"},
        _ADMIN: {"bootstrap.servers"}}
REPLICATION_FACTOR_DEFAULT = -1     # Kafka's: the broker's default.replication.factor


def _config(config: dict) -> dict:
    c = dict(config)
    for key in ("application.id", "bootstrap.servers"):
        if not c.get(key):
            raise TopologyError(f"config '{key}' is required")
    c = streams_config(c)
    c.setdefault("state.dir", os.path.join(tempfile.gettempdir(), "riverlog-streams"))
    reset = c.setdefault("auto.offset.reset", "earliest")
    if reset not in ("earliest", "latest"):
        raise InvalidConfigError(f"auto.offset.reset {reset!r}: expected earliest or latest", config="auto.offset.reset")
    try:
        c["replication.factor"] = int(c.get("replication.factor", REPLICATION_FACTOR_DEFAULT))
    except (TypeError, ValueError):
        raise InvalidConfigError(f"replication.factor {c['replication.factor']!r}: expected a number of replicas, "
                                 f"or -1 for the broker's default.replication.factor",
                                 config="replication.factor") from None
    if c["replication.factor"] == 0 or c["replication.factor"] < -1:
        raise InvalidConfigError(f"replication.factor {c['replication.factor']}: expected a number of replicas "
                                 f">= 1, or -1 for the broker's default.replication.factor", config="replication.factor")
    c["repartition.purge.interval.ms"] = at_least(c, "repartition.purge.interval.ms", PURGE_INTERVAL_MS_DEFAULT,
                                                  "milliseconds >= 0")
    if c["max.task.idle.ms"] > 0:
        log.warning("max.task.idle.ms=%s is not applied on Spark: a micro-batch holds what each input partition "
                    "had when it started, and its records are merged by timestamp", c["max.task.idle.ms"])
    _log_unused(c)
    return c


def _client(config: dict, *prefixes: str) -> dict:
    """The settings given under Kafka's client ``prefixes`` (a later prefix wins, as Kafka's
    ``main.consumer.`` over ``consumer.``), less those Riverlog sets itself for that client."""
    out = {}
    for prefix in prefixes:
        own = _OWN[_CONSUMER if prefix == _MAIN_CONSUMER else prefix]
        for k, v in config.items():
            if k.startswith(prefix) and k[len(prefix):] not in own:
                out[k[len(prefix):]] = v
    return out


def _log_unused(c: dict) -> None:
    """Kafka's ``AbstractConfig.logUnused``, once per application: the keys nothing here reads."""
    unused, own = [], []
    for k in sorted(c):
        if k in APPLIED or k.startswith((_PRODUCER, _CONSUMER, _MAIN_CONSUMER, _ADMIN)):
            prefix = next((p for p in (_MAIN_CONSUMER, _PRODUCER, _CONSUMER, _ADMIN) if k.startswith(p)), None)
            if prefix is not None and k[len(prefix):] in _OWN[_CONSUMER if prefix == _MAIN_CONSUMER else prefix]:
                own.append(k)
            continue
        unused.append(k)
    if unused:
        log.info("These configurations '%s' were supplied but are not used yet.", unused)
    if own:
        log.warning("These configurations '%s' are set by Riverlog Streams itself and were ignored.", own)


class StreamsApp:
    def __init__(self, topology: Topology, spark, config: dict):
        self.topology, self.spark = topology, spark
        self.config = _config(config)
        self.app = self.config["application.id"]
        self.defaults = default_serdes(self.config)
        self.policy = task_policy(self.config)
        check_serdes(topology, self.defaults)
        from streams.global_table import check_global_on_spark
        from streams.joins import refuse_on_spark
        refuse_on_spark(topology)
        check_global_on_spark(topology)
        self.queries = []
        self.purger: RepartitionPurger | None = None
        self._partitions: dict[str, int] = {}
        self._copartitioned: dict[str, int] = {}

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
        return {self.topology.topic(self.app, n, t) for n in sub.sources if not n.internal
                for t in n.topics if getattr(n.args.get("consumed"), "timestamp_extractor", None) is None}

    def describe(self):
        from streams.topology import TopologyDescription
        combines = {s.id: self._combine(s) for s in self.topology.subtopologies}
        return TopologyDescription(self.topology, self.app,
                                   {i: c.DESCRIPTION for i, c in combines.items() if c is not None},
                                   self.decode_in_spark)

    def _combine(self, sub: SubTopology):
        """How the sub-topology's rows are combined before its task (a windowed count per window,
        a cached source table per key), or None."""
        if not self.decode_in_spark or spark_plan.plan(sub).source is not None or global_topics(self.topology, sub):
            return None
        cache = self.config["statestore.cache.max.bytes"]
        return (window_combine.combinable(sub, self.defaults, cache)
                or table_combine.combinable(sub, self.defaults, cache))

    # ------------------------------------------------------------------ topics
    def _topic_partitions(self, admin: AdminClient) -> None:
        md = admin.list_topics(timeout=30)
        for name, t in md.topics.items():
            self._partitions[name] = len(t.partitions)

    def partitions(self, topic: str) -> int:
        if topic in self._copartitioned:
            return self._copartitioned[topic]
        if topic in self._partitions:
            return self._partitions[topic]
        n = self.topology.repartition_partitions(self.app, topic, self.partitions)
        if n is not None:
            return n
        raise StreamsError(f"source topic {topic!r} does not exist: create it before starting the application")

    def tasks(self, sub: SubTopology) -> int:
        """Kafka's tasks: one per partition of the sub-topology's own topics (a global table's
        topic, whatever its partitions, is read whole by every task)."""
        return max(self.partitions(t) for t in self.topology.source_topics(self.app, sub))

    def runnable(self) -> list[SubTopology]:
        """The sub-topologies that become queries, each with the global stores it joins; a global
        sub-topology generates no tasks of its own."""
        from streams.global_table import is_global, with_global_stores
        return [with_global_stores(self.topology, s) for s in self.topology.subtopologies if not is_global(s)]

    def _create_internal_topics(self) -> None:
        from streams.joins import copartition
        admin = AdminClient(self.admin)
        self._topic_partitions(admin)
        self._copartitioned = copartition(self.topology, self.app, self._partitions.get)
        existing = set(self._partitions)  # the loops below cache repartition topics' counts too
        wanted = []
        for sub in self.topology.subtopologies:
            for n in sub.sinks:
                if n.internal:
                    t = f"{self.app}-{n.topics[0]}"
                    # Records keep their event time, which may be older than any retention.ms: a
                    # repartition topic keeps them until read and purged, as Kafka Streams' does
                    # (its RepartitionTopicConfig: delete policy, 50 MiB segments, no retention.ms).
                    wanted.append(NewTopic(t, self.partitions(t), self.config["replication.factor"],
                                           config={"cleanup.policy": "delete", "segment.bytes": "52428800",
                                                   "retention.ms": "-1"}))
                    self._partitions[t] = self.partitions(t)
        for sub in self.runnable():
            if not sub.stateful:
                continue
            n = self.tasks(self.topology.subtopologies[sub.id])
            for t, topic_config in ([(changelog_topic(self.app, s.name), s.changelog_config()) for s in sub.stores]
                                    + [(meta_changelog(self.app, sub.id), {"cleanup.policy": "compact"})]):
                wanted.append(NewTopic(t, n, self.config["replication.factor"], config=topic_config))
        wanted.append(NewTopic(self._generations_topic, 1, self.config["replication.factor"],
                               config={"cleanup.policy": "compact"}))
        futures = admin.create_topics([w for w in wanted if w.topic not in existing])
        for topic, f in futures.items():
            try:
                f.result()
            except TopicAlreadyExistsError:
                pass
        for w in wanted:
            have = self._partitions.get(w.topic)
            if have is not None and have != w.num_partitions:
                raise StreamsError(f"internal topic {w.topic!r} has {have} partitions, the topology needs "
                                   f"{w.num_partitions}: delete it (riverlog topics delete) and restart")
            self._partitions[w.topic] = w.num_partitions

    # ------------------------------------------------------------------ generations
    @property
    def _generations_topic(self) -> str:
        return f"{self.app}-streams-generations"

    def _generations(self) -> dict[str, int]:
        c = Consumer({**self.client, "group.id": f"{self.app}-generations-reader", "enable.auto.commit": False,
                      "isolation.level": "read_committed"})
        try:
            tp = TopicPartition(self._generations_topic, 0, 0)
            low, high = c.get_watermark_offsets(tp, timeout=30)
            out: dict[str, int] = {}
            if high <= low:
                return out
            c.assign([TopicPartition(self._generations_topic, 0, low)])
            pos = low
            while pos < high:
                for m in c.consume(500, timeout=5):
                    if m.error():
                        continue
                    out[m.key().decode()] = int(m.value())
                    pos = m.offset() + 1
            return out
        finally:
            c.close()

    def _next_generation(self, sub: SubTopology) -> int:
        gens = self._generations()
        key = f"subtopology-{sub.id}"
        previous = gens.get(key)
        if previous is not None and self.config["processing.guarantee"] == EXACTLY_ONCE_V2:
            self._finish_pending(self._owner(sub, previous))
        generation = (previous or 0) + 1
        p = Producer({**self.client, "acks": "all"})
        p.produce(self._generations_topic, key=key.encode(), value=str(generation).encode())
        if p.flush(30):
            raise StreamsError(f"could not record generation {generation} of {key} in {self._generations_topic}")
        return generation

    def _finish_pending(self, owner: str) -> None:
        """A batch decided but not ended when the last generation stopped: end it before the state is
        rebuilt, so the changelogs and offsets read back include it. The batch after it, written but
        never decided, is aborted: its open transactions would hold every read_committed reader of
        the outputs, changelogs and repartition topics until transaction.timeout.ms (every batch of
        a Streams query records a decision, since it commits offsets, so it is the next batch id)."""
        with ExactlyOnce(self.client, owner) as eo:
            decision = eo.log.latest(owner)
            if decision is not None:
                eo.commit(decision.batch_id, decision.attempts, record=False)
            eo.abort_strays(decision.batch_id + 1 if decision is not None else 0, None)

    def _owner(self, sub: SubTopology, generation: int) -> str:
        return f"{self.app}-{sub.id}-g{generation}"

    # ------------------------------------------------------------------ queries
    def _checkpoint(self, sub: SubTopology) -> str:
        return os.path.join(self.config["state.dir"], self.app, f"subtopology-{sub.id}")

    def _reset(self, topic: str) -> int:
        """Where a partition with no committed offset starts: the source's
        ``Consumed.withOffsetResetPolicy``, else ``auto.offset.reset`` (-2 earliest, -1 latest)."""
        policy = self.config["auto.offset.reset"]
        for n in self.topology.nodes:
            consumed = n.args.get("consumed") if n.kind == "source" else None
            if consumed is not None and consumed.offset_reset and topic in n.topics:
                policy = consumed.offset_reset
        return -2 if policy == "earliest" else -1

    def _committed(self, topics: list[str]) -> dict[str, dict[str, int]]:
        c = Consumer({**self.client, "group.id": self.app, "enable.auto.commit": False})
        try:
            tps = [TopicPartition(t, p) for t in topics for p in range(self.partitions(t))]
            out: dict[str, dict[str, int]] = {t: {} for t in topics}
            for tp in c.committed(tps, timeout=30):
                out[tp.topic][str(tp.partition)] = tp.offset if tp.offset >= 0 else self._reset(tp.topic)
            return out
        finally:
            c.close()

    def _start(self, sub: SubTopology):
        topics = self.topology.source_topics(self.app, sub)
        ckpt = self._checkpoint(sub)
        owner_file = os.path.join(ckpt, "riverlog-streams-owner")
        if os.path.exists(owner_file) and not _committed_a_batch(ckpt):
            log.info("sub-topology %s: its checkpoint %s holds no finished batch; starting from the broker", sub.id, ckpt)
            shutil.rmtree(ckpt)
        fresh = not os.path.exists(owner_file)
        reader = (self.spark.readStream.format("riverlog")
                  .option("riverlog.bootstrap.servers", self.config["bootstrap.servers"])
                  .option("subscribe", ",".join(topics)).option("includeHeaders", "true"))
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
            generation = self._next_generation(sub)
            reader = reader.option("startingOffsets", json.dumps(self._committed(topics)))
            os.makedirs(ckpt, exist_ok=True)
            if os.path.exists(os.path.join(ckpt, "offsets")):
                raise StreamsError(f"checkpoint {ckpt} has offsets but no owner file; delete the directory")
            owner = self._owner(sub, generation)
        else:
            with open(owner_file) as f:
                owner = f.read().strip()
        df = reader.load()
        p = spark_plan.plan(sub, self.decode_in_spark)
        combine = self._combine(sub) if sub.stateful and p.sink is None else None
        if (p.source is not None or combine is not None) and self._default_timestamped(sub):
            df = spark_plan.fail_on_invalid_timestamp(df, self._default_timestamped(sub))
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

    def start(self) -> "StreamsApp":
        if self.queries:
            raise StreamsError("the application is already running")
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        self._create_internal_topics()
        self.queries = [self._start(sub) for sub in self.runnable()]
        readers = [(self._checkpoint(sub), {self.topology.topic(self.app, n, t) for n in sub.sources if n.internal
                                            for t in n.topics}) for sub in self.runnable()]
        self.purger = RepartitionPurger(self.client, [r for r in readers if r[1]],
                                        self.config["repartition.purge.interval.ms"]).start()
        return self

    def processAllAvailable(self, rounds: int = 50) -> None:
        """Process until no query has input left (a repartition topic feeds the next query, so repeat)."""
        for _ in range(rounds):
            before = [q.lastProgress["batchId"] if q.lastProgress else -1 for q in self.queries]
            for q in self.queries:
                q.processAllAvailable()
            after = [q.lastProgress["batchId"] if q.lastProgress else -1 for q in self.queries]
            if before == after:
                return

    def close(self) -> None:
        if self.purger is not None:
            self.purger.close()
            self.purger = None
        for q in self.queries:
            q.stop()
        self.queries = []

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ interactive queries
    def store(self, name: str):
        """An interactive query: the store ``name`` read from its committed changelog."""
        from streams.interactive import read_store
        spec = self.topology.stores().get(name)
        if spec is None:
            from streams.errors import InvalidStateStoreError
            raise InvalidStateStoreError(f"no store named {name!r}; the topology has {sorted(self.topology.stores())}")
        from streams.global_table import global_stores
        try:
            return read_store(self.client, changelog_topic(self.app, name), spec,
                              only=0 if name in global_stores(self.topology) else None,
                              key_serde=spec.key_serde or self.defaults[0])
        except KeyError:
            from streams.errors import InvalidStateStoreError   # Kafka's StreamsNotStartedException is one
            raise InvalidStateStoreError(f"store {name!r} has no changelog topic {changelog_topic(self.app, name)!r} "
                                         f"yet: start the application first") from None


_PLACEMENT = "riverlog-streams-placement"   # beside a stateful query's checkpoint: its state partitions and keys


def _committed_a_batch(checkpoint: str) -> bool:
    """Whether Spark's commit log in ``checkpoint`` holds a batch. A query killed before its first
    batch finished is started again from the broker, not from this checkpoint: Spark would replay
    batch 0 from the source's initial offsets asked anew (this start's ``startingOffsets`` are not
    given again) and without the state restored from the changelogs (``initialState`` is only for a
    fresh start), so the replay would read the wrong records into an empty store. From the broker,
    the batch is finished if it was decided and aborted if not, and state and offsets are read back."""
    commits = os.path.join(checkpoint, "commits")
    return os.path.isdir(commits) and any(name.isdigit() for name in os.listdir(commits))


def _placement(checkpoint: str, tasks: int, fresh: bool) -> tuple[int | None, tuple[int, ...]]:
    """(state partitions, a grouping key per task) of a stateful query: for a fresh checkpoint one
    partition per task, each task's key placed in its own (:mod:`streams.task_placement`); else the
    keys kept beside the checkpoint, or, for a checkpoint made before them, the task numbers. The
    partitions of an existing checkpoint are Spark's to keep (None)."""
    if fresh:
        return max(1, tasks), placement_keys(tasks)
    path = os.path.join(checkpoint, _PLACEMENT)
    if not os.path.exists(path):
        return None, identity(tasks)
    with open(path) as f:
        kept = json.load(f)
    return None, placement_keys(tasks, kept["partitions"], kept["keys"])


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
