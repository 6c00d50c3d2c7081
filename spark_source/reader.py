"""Batch and streaming readers: plan offset ranges on the driver, read them as Arrow on executors.

The driver asks the broker for partitions and watermarks (a read_committed query stops at each
partition's last stable offset) and cuts the work into :class:`~spark_source.planning.Slice`\\ s;
each Spark task reads one slice with a Riverlog consumer and hands Spark Arrow record batches in
the Kafka source's schema. Gaps in offsets (compaction, transaction markers, aborted records) are
normal and never reported as data loss; offsets below a partition's log start (retention,
DeleteRecords), a topic that disappeared, a latest offset below the query's position and an added
partition that does not start at 0 are (Spark's ``reportDataLoss`` cases), and fail the query
unless ``failOnDataLoss=false``. The driver never creates a topic.

After each micro-batch the source commits its end offsets to the broker consumer group
``groupId``, so ``riverlog groups describe`` shows the query's lag; Spark's checkpoint stays the
source of truth for recovery.
"""
from __future__ import annotations

import logging
import re
import time

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadMaxRows, ReadMinRows,
                                              SupportsTriggerAvailableNow)

from broker.errors import (InvalidConfigError, OffsetOutOfRangeError, RiverlogError, UnknownMemberIdError,
                           UnknownTopicOrPartitionError)
from spark_source.options import EARLIEST, LATEST, SourceOptions
from spark_source.planning import TP, Slice, align_to_time, available, from_json, rate_limit, slices, to_json

log = logging.getLogger(__name__)
# The group-commit metadata that marks batch 0's start (Spark does not keep it: see initialOffset),
# followed by ":" and the query's SourceOptions.start_fingerprint().
START_PIN = "riverlog.spark.initialOffset"

_HEADER_TYPE = pa.list_(pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())])))


class DataLossError(RiverlogError):
    """Offsets the query should have read are gone (``failOnDataLoss=true``)."""
    code, name, retriable, grpc_status = 1101, "DATA_LOSS", False, "DATA_LOSS"


# ---------------------------------------------------------------------------------- the driver side
def retrying(call, attempts: int, interval_ms: int, what: str, sleep=time.sleep):
    """``call()``, tried up to ``attempts`` times while it fails with a retriable error, waiting
    ``interval_ms`` between tries (Spark's ``fetchOffset.numRetries`` / ``fetchOffset.retryIntervalMs``)."""
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except RiverlogError as e:
            if not getattr(e, "retriable", False) or attempt == attempts:
                raise
            log.warning("fetching %s failed (attempt %d of %d, fetchOffset.numRetries): %s; retrying in %d ms",
                        what, attempt, attempts, e, interval_ms)
            sleep(interval_ms / 1000)


class OffsetLookup:
    """The driver's view of the topics: partitions, watermarks, offsets for timestamps. Every
    question to the brokers is retried as ``fetchOffset.numRetries`` and ``fetchOffset.retryIntervalMs`` say."""

    def __init__(self, options: SourceOptions):
        from broker.client import Consumer
        self.options = options
        self._committed: tuple[dict[TP, int], bool] | None = None  # the group's offsets as last committed here
        self._reader = None   # a consumer for timestamps_at(), made when first needed
        self._admin = None    # describe_topics for topics() (never creates one), made when first needed
        try:
            # A lookup never creates a topic: a watermark asked of a topic deleted meanwhile fails
            # rather than recreating it (Spark's driver asks with an Admin client, which cannot create).
            self.consumer = Consumer({**options.client_config(), "group.id": options.group_id,
                                      "enable.auto.commit": False, "allow.auto.create.topics": False})
        except InvalidConfigError as e:  # a riverlog.* consumer setting: name the option as the user wrote it
            name = f"riverlog.{e.details.get('config', '')}"
            raise InvalidConfigError(f"option '{name}': {e}", config=name) from e

    def close(self) -> None:
        self.consumer.close()
        if self._reader is not None:
            self._reader.close()
        if self._admin is not None:
            self._admin.close()

    def _retrying(self, call, what: str):
        return retrying(call, self.options.fetch_offset_attempts, self.options.fetch_offset_retry_interval_ms, what)

    def partitions(self) -> list[TP]:
        """The query's partitions, as Spark's ``ConsumerStrategy.assignedTopicPartitions`` finds them
        with ``describeTopics`` (which never creates a topic): every ``subscribe`` or ``assign``
        topic must exist; ``subscribePattern`` keeps the matching topics the broker does not mark
        internal."""
        o = self.options
        described = self._retrying(self._described, "topics")
        if o.assign is not None:
            return [(t, p) for t, ps in o.assign.items() for p in ps]
        return sorted((t, p) for t, d in described.items() for p in d)

    def _described(self) -> dict[str, list[int]]:
        """``{topic: partitions}`` of the query's topics; a ``subscribe`` or ``assign`` topic the
        cluster does not have fails (Spark's ``UnknownTopicOrPartitionException``), retried as the
        other questions are in case one is being created. A partition ``assign`` names that its
        topic does not have fails too: Spark drops it silently, and with it the records the query
        was asked to read."""
        from broker.client import AdminClient, TopicCollection
        o = self.options
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": o.bootstrap_servers})
        if o.subscribe_pattern is not None:
            pattern = re.compile(o.subscribe_pattern)
            names = [t for t in self._admin.list_topics(timeout=30).topics if pattern.search(t)]
        else:
            names = list(o.subscribe or o.assign)
        out, missing = {}, []
        for name, future in self._admin.describe_topics(TopicCollection(names)).items():
            try:
                d = future.result(30)
            except UnknownTopicOrPartitionError:
                missing.append(name)   # a matched topic deleted since it was listed: not matched
                continue
            if not (o.subscribe_pattern is not None and d.is_internal):
                out[name] = sorted(p.id for p in d.partitions)
        option = "subscribe" if o.subscribe else "assign"
        if missing and o.subscribe_pattern is None:
            them = "them" if len(missing) > 1 else "it"
            raise UnknownTopicOrPartitionError(
                f"option '{option}' names {', '.join(repr(t) for t in missing)}, which the cluster does not have: "
                f"create {them} (riverlog topics create) or drop {them} from '{option}'")
        absent = [f"{t}-{p}" for t, ps in (o.assign or {}).items() for p in ps if p not in out[t]]
        if absent:
            raise UnknownTopicOrPartitionError(
                f"option 'assign' names {', '.join(absent)}, which the cluster does not have ("
                + "; ".join(f"topic '{t}' has {len(out[t])} partition(s)" for t in sorted(o.assign))
                + "): drop them from 'assign' or add partitions (riverlog topics alter)")
        return out

    def watermarks(self, tps) -> dict[TP, tuple[int, int]]:
        from broker.client import TopicPartition
        return self._retrying(lambda: {tp: self.consumer.get_watermark_offsets(TopicPartition(*tp), 30)
                                       for tp in tps}, "watermarks")

    def resolve(self, spec, tps: list[TP], what: str) -> dict[TP, int]:
        """``earliest``/``latest``/{tp: offset or -2/-1} as offsets of ``tps``."""
        if spec in ("earliest", "latest"):
            marks = self.watermarks(tps)
            return {tp: marks[tp][0 if spec == "earliest" else 1] for tp in tps}
        given = per_partition(spec, tps, what)
        marks = self.watermarks(tps)
        return {tp: marks[tp][0] if given[tp] == EARLIEST else marks[tp][1] if given[tp] == LATEST else given[tp]
                for tp in tps}

    def starting(self, tps: list[TP]) -> dict[TP, int]:
        """Spark's precedence: startingTimestamp, then startingOffsetsByTimestamp, then startingOffsets.
        A partition with no record that recent fails the query, or starts at its end with
        ``startingOffsetsByTimestampStrategy=latest``."""
        o = self.options
        if o.starting_timestamp is not None:
            stamps = {tp: o.starting_timestamp for tp in tps}
        elif o.starting_by_timestamp is not None:
            stamps = per_partition(o.starting_by_timestamp, tps, "startingOffsetsByTimestamp")
        else:
            return self.resolve(o.starting, tps, "startingOffsets")
        found = self.offsets_for_times(stamps)
        if o.timestamp_strategy == "error":
            late = [tp for tp in tps if found[tp] is None]
            if late:
                raise DataLossError(
                    "no record of " + ", ".join(f"{t}-{p}" for t, p in late) + " has a timestamp at or after "
                    f"{stamps[late[0]]} (startingOffsetsByTimestampStrategy=error; 'latest' starts there at the end)")
        return self._or_latest(found, tps)

    def ending(self, tps: list[TP]) -> dict[TP, int]:
        """Spark's precedence: endingTimestamp, then endingOffsetsByTimestamp, then endingOffsets. A
        partition with no record at or after the timestamp ends at its latest offset (as in Spark)."""
        o = self.options
        if o.ending_timestamp is not None:
            stamps = {tp: o.ending_timestamp for tp in tps}
        elif o.ending_by_timestamp is not None:
            stamps = per_partition(o.ending_by_timestamp, tps, "endingOffsetsByTimestamp")
        else:
            return self.resolve(o.ending, tps, "endingOffsets")
        return self._or_latest(self.offsets_for_times(stamps), tps)

    def offsets_for_times(self, stamps: dict[TP, int]) -> dict[TP, int | None]:
        """The first offset at or after each timestamp; None where no record is that recent."""
        from broker.client import TopicPartition
        found = self._retrying(lambda: {(r.topic, r.partition): r.offset for r in self.consumer.offsets_for_times(
            [TopicPartition(t, p, ts) for (t, p), ts in sorted(stamps.items())], 30)}, "offsets for timestamps")
        return {tp: found[tp] if found.get(tp, -1) >= 0 else None for tp in stamps}

    def timestamps_at(self, offsets: dict[TP, int], latest: dict[TP, int],
                      timeout_s: float = 10.0) -> dict[TP, int | None]:
        """The timestamp of the first record each partition holds at or after its offset and before
        ``latest``; None where there is none (aborted records, transaction markers) or it did not
        arrive within ``timeout_s``. Read by a second consumer, assigned for this question only."""
        from broker.client import Consumer, TopicPartition
        if self._reader is None:
            self._reader = Consumer({**self.options.client_config(), "enable.auto.commit": False,
                                     "allow.auto.create.topics": False,
                                     "max.partition.fetch.bytes": 65_536, "queued.max.messages.kbytes": 1_024})
        c, out = self._reader, {}
        c.assign([TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())])
        try:
            deadline = time.monotonic() + timeout_s
            while len(out) < len(offsets) and time.monotonic() < deadline:
                for m in c.consume(500, 0.05):
                    tp = (m.topic(), m.partition())
                    if m.error() is None and tp in offsets and tp not in out and m.offset() >= offsets[tp]:
                        out[tp] = m.timestamp()[1] if m.offset() < latest[tp] else None
                for pos in c.position([TopicPartition(*tp) for tp in offsets if tp not in out]):
                    if pos.offset >= latest[(pos.topic, pos.partition)]:
                        out[(pos.topic, pos.partition)] = None   # read to the end: nothing visible there
        finally:
            c.unassign()
        return {tp: out.get(tp) for tp in offsets}

    def _or_latest(self, found: dict[TP, int | None], tps: list[TP]) -> dict[TP, int]:
        marks = self.watermarks(tps)
        return {tp: marks[tp][1] if found[tp] is None else found[tp] for tp in tps}

    def commit_group(self, offsets: dict[TP, int], pin: bool = False) -> None:
        """The finished batch's end offsets, committed to ``groupId`` for lag tools; ``pin`` marks
        them as batch 0's start (see ``StreamReader.initialOffset``)."""
        from broker.client import TopicPartition
        if not offsets or self._committed == (offsets, pin):
            return  # Spark's commit() of a batch repeats what the next latestOffset() committed
        mark = self._pin_mark() if pin else None
        try:
            self.consumer.commit(offsets=[TopicPartition(t, p, o, metadata=mark)
                                          for (t, p), o in sorted(offsets.items())], asynchronous=False)
            self._committed = (dict(offsets), pin)
        except UnknownMemberIdError:   # Kafka's answer to a commit from outside a group with members
            log.warning("group '%s' has members: the query's offsets are not committed there",
                        self.options.group_id)
        except RiverlogError as e:
            log.warning("could not commit offsets to group '%s': %s", self.options.group_id, e)


    def _pin_mark(self) -> str:
        return f"{START_PIN}:{self.options.start_fingerprint()}"

    def pinned_start(self, tps: list[TP]) -> dict[TP, int] | None:
        """Batch 0's start as an earlier ``initialOffset`` of a query with the same topics and start
        options pinned it, if every partition has it. A pin of other options (another query using
        the same group) is not this query's: Spark takes a new checkpoint's start from
        ``startingOffsets`` only, never from ``kafka.group.id``."""
        from broker.client import TopicPartition
        try:
            found = self.consumer.committed([TopicPartition(t, p) for t, p in tps], timeout=30)
        except RiverlogError as e:
            log.warning("could not read group '%s' for a pinned start: %s", self.options.group_id, e)
            return None
        mark = self._pin_mark()
        if not tps or any(f.metadata != mark or f.offset < 0 for f in found):
            return None
        return {(f.topic, f.partition): f.offset for f in found}


def per_partition(spec: dict, tps: list[TP], option: str) -> dict[TP, int]:
    """A per-partition option (``startingOffsets`` JSON, ``...ByTimestamp``) as ``{tp: value}``. As in
    Spark (``KAFKA_START_OFFSET_DOES_NOT_MATCH_ASSIGNED``) it must name exactly the query's
    partitions: a partition left out or one the query does not read is refused."""
    def names(parts) -> str:
        return ", ".join(f"{t}-{p}" for t, p in sorted(parts))

    given = {(t, p): value for t, parts in spec.items() for p, value in parts.items()}
    missing, unknown = set(tps) - set(given), set(given) - set(tps)
    if missing or unknown:
        wrong = "; ".join(filter(None, [missing and f"leaves out {names(missing)}",
                                        unknown and f"names {names(unknown)}, which the query does not read"]))
        hint = " (-2 earliest, -1 latest)" if option.endswith("Offsets") else ""
        raise InvalidConfigError(f"option '{option}' {wrong}: name every partition the query reads and only "
                                 f"those, {names(tps)}{hint}", config=option)
    return given


def report_data_loss(options: SourceOptions, message: str, error_class: str) -> None:
    """Spark's ``reportDataLoss``: fail the query (``failOnDataLoss=true``) or warn and go on.
    ``error_class`` is the condition Spark's ``KafkaExceptions`` raises (``KAFKA_DATA_LOSS.*``)."""
    if options.fail_on_data_loss:
        raise DataLossError(f"{message}; set failOnDataLoss=false to go on with a warning", error_class=error_class)
    log.warning("%s (failOnDataLoss=false: going on)", message)


def check_start(options: SourceOptions, start: dict[TP, int], marks: dict[TP, tuple[int, int]]) -> dict[TP, int]:
    """Offsets below a partition's log start were removed before the query read them."""
    out = dict(start)
    for tp, offset in start.items():
        low = marks[tp][0]
        if offset < low:
            message = (f"offsets [{offset}, {low}) of {tp[0]}-{tp[1]} were removed (retention or DeleteRecords) "
                       f"before the query read them")
            if options.fail_on_data_loss:
                raise DataLossError(message + "; set failOnDataLoss=false to skip them with a warning")
            log.warning("%s; skipping them (failOnDataLoss=false)", message)
            out[tp] = low
    return out


# ---------------------------------------------------------------------------------- the executor side
def to_spark(table: pa.Table, include_headers: bool) -> list[pa.RecordBatch]:
    """The consumer's Arrow table in Spark's Kafka source schema, types exactly as Spark expects.
    Its chunks stay apart (one record batch each): joining them would copy every value."""
    columns = [table["key"], table["value"], table["topic"], table["partition"], table["offset"],
               pc.multiply(table["timestamp"], 1000).cast(pa.timestamp("us", tz="UTC")),
               table["timestamp_type"].cast(pa.int32())]
    names = ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType"]
    if include_headers:
        columns.append(table["headers"].cast(_HEADER_TYPE))
        names.append("headers")
    return pa.Table.from_arrays(columns, names=names).to_batches()


def read_slice(options: SourceOptions, piece: Slice):
    """Yield Arrow batches of offsets [start, until) of one partition."""
    from broker.client import Consumer, TopicPartition
    tp = TopicPartition(piece.topic, piece.partition, piece.start)
    # A task reads one partition straight through, prefetching while Spark consumes. Fetches of 4 MiB
    # read 500,000 rows twice as fast as 16 MiB ones, with half the broker's CPU (BENCHMARKS.md, "Spark").
    consumer = Consumer({"max.partition.fetch.bytes": 4 << 20, "fetch.max.bytes": 64 << 20,
                         "queued.max.messages.kbytes": 256 << 10, "allow.auto.create.topics": False,
                         **options.client_config(), "auto.offset.reset": "error", "enable.auto.commit": False})
    try:
        consumer.assign([tp])
        position, last_progress = piece.start, time.monotonic()
        while position < piece.until:
            try:
                table = consumer.poll_batch(min(1.0, options.poll_timeout_ms / 1000),
                                            max_records=piece.until - position)
            except OffsetOutOfRangeError:
                low = consumer.get_watermark_offsets(TopicPartition(piece.topic, piece.partition), 30)[0]
                message = (f"offsets [{position}, {min(low, piece.until)}) of {piece.topic}-{piece.partition} "
                           f"were removed (retention or DeleteRecords) while the query was reading them")
                if options.fail_on_data_loss:
                    raise DataLossError(message + "; set failOnDataLoss=false to skip them with a warning") from None
                log.warning("%s; skipping them (failOnDataLoss=false)", message)
                consumer.seek(TopicPartition(piece.topic, piece.partition, min(low, piece.until)))
                position = min(low, piece.until)
                continue
            if table is not None and table.num_rows:
                if table["offset"][-1].as_py() >= piece.until:  # offsets rise: filter only an overshoot
                    table = table.filter(pc.less(table["offset"], piece.until))
                if table.num_rows:
                    yield from to_spark(table, options.include_headers)
            moved = consumer.position([TopicPartition(piece.topic, piece.partition)])[0].offset
            if moved > position:
                position, last_progress = moved, time.monotonic()
            elif (time.monotonic() - last_progress) * 1000 > options.poll_timeout_ms:
                raise RiverlogError(f"no record of {piece.topic}-{piece.partition} at or after offset {position} "
                                    f"(wanted up to {piece.until}) arrived within kafkaConsumer.pollTimeoutMs="
                                    f"{options.poll_timeout_ms}")
    finally:
        consumer.close()


# ---------------------------------------------------------------------------------- readers
class BatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions):
        self.options = options

    def partitions(self):
        lookup = OffsetLookup(self.options)
        try:
            tps = lookup.partitions()
            if not tps:
                raise UnknownTopicOrPartitionError(f"no partition matches {self._what()}")
            start = check_start(self.options, lookup.starting(tps), lookup.watermarks(tps))
            end = lookup.ending(tps)
        finally:
            lookup.close()
        return [InputPartition(s) for s in slices(start, end, self.options.min_partitions,
                                                    self.options.max_records_per_partition)]

    def _what(self) -> str:
        o = self.options
        return f"subscribe={o.subscribe}" if o.subscribe else \
            f"subscribePattern={o.subscribe_pattern}" if o.subscribe_pattern else f"assign={o.assign}"

    def read(self, partition):
        # With no slice to read (every partition empty) Spark still runs one task, whose partition
        # carries no value.
        if getattr(partition, "value", None) is not None:
            yield from read_slice(self.options, partition.value)


class StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    clock = staticmethod(time.monotonic)   # seconds; minOffsetsPerTrigger's maxTriggerDelay is measured with it

    def __init__(self, options: SourceOptions):
        self.options = options
        self._lookup: OffsetLookup | None = None
        self._target: dict[TP, int] | None = None  # Trigger.AvailableNow: nothing past this
        self._last_trigger: float | None = None     # minOffsetsPerTrigger: when a batch last ran (None: not yet)
        self._initial: dict[TP, int] | None = None   # batch 0's start, as initialOffset answered it
        self._reported: dict[TP, int] | None = None  # the latest offsets latestOffset() saw

    def __getstate__(self):  # executors get the options, not the driver's connections
        state = dict(self.__dict__)
        state["_lookup"] = None
        return state

    @property
    def lookup(self) -> OffsetLookup:
        if self._lookup is None:
            self._lookup = OffsetLookup(self.options)
        return self._lookup

    def initialOffset(self) -> dict:
        """Batch 0's start, the same on every call. Spark keeps only each batch's end in its offset
        log and asks again for batch 0's start when it replays it after a crash; ``latest`` resolved
        anew would then skip what arrived in between. So the first answer is committed to the query's
        group with the :data:`START_PIN` mark and the fingerprint of the start options, and answered
        again while that mark is there; the first finished batch's commit replaces it (so a later
        query with a new checkpoint starts afresh), and a query with other start options or topics
        ignores it and pins its own. Spark gives a Python source neither the checkpoint nor the
        query id, so a new checkpoint with the same options and group still starts at the pin."""
        tps = self.lookup.partitions()
        pinned = self.lookup.pinned_start(tps)
        if pinned is None:
            pinned = self.lookup.starting(tps)
            self.lookup.commit_group(pinned, pin=True)
        self._initial = pinned
        return to_json(pinned)

    def getDefaultReadLimit(self):
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def _latest(self) -> dict[TP, int]:
        tps = self.lookup.partitions()
        return {tp: marks[1] for tp, marks in self.lookup.watermarks(tps).items()}

    def latestOffset(self, start: dict, limit) -> dict:
        begin = from_json(start)
        # The batch that ended at ``start`` is done; batch 0's start stays pinned until batch 0 is.
        self.lookup.commit_group(begin, pin=begin == self._initial)
        latest = self._reported = self._latest()
        gone = sorted(set(begin) - set(latest))
        if gone:
            message = f"partitions {', '.join(f'{t}-{p}' for t, p in gone)} disappeared (topic deleted?)"
            if self.options.fail_on_data_loss:
                raise DataLossError(message + "; set failOnDataLoss=false to go on without them")
            log.warning("%s; going on without them (failOnDataLoss=false)", message)
        if self._target is not None:
            latest = {tp: min(off, self._target.get(tp, off)) for tp, off in latest.items()}
        # Partitions added to a topic are read from their start (as Spark's Kafka source does).
        new = [tp for tp in latest if tp not in begin]
        if new:
            added = {tp: marks[0] for tp, marks in self.lookup.watermarks(new).items()}
            for (t, p), first in sorted(added.items()):
                if first != 0:
                    report_data_loss(self.options, f"Added partition {t}-{p} starts from {first} instead of 0. "
                                     "Some data may have been missed",
                                     "KAFKA_DATA_LOSS.ADDED_PARTITION_DOES_NOT_START_FROM_OFFSET_ZERO")
            begin.update(added)
        moved_back = self._moved_back(begin, latest)
        if isinstance(limit, ReadAllAvailable):
            return to_json(latest)
        if not moved_back and not self._enough(begin, latest, limit):
            return start
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else self.options.max_offsets_per_trigger
        end = rate_limit(begin, latest, max_rows, self.options.unlimited_topics) if max_rows else latest
        if self.options.align_by_timestamp and end != latest:
            end = self._aligned(begin, end, latest)
        return to_json(end)

    def _moved_back(self, begin: dict[TP, int], latest: dict[TP, int]) -> bool:
        """A partition whose latest offset is below the query's position (its topic was deleted and
        created again, or ``startingOffsets`` lay past its end): Spark's
        ``getOffsetRangesFromResolvedOffsets`` reports it as data loss, and without
        ``failOnDataLoss`` the query goes on from the lower offset, which this batch ends at."""
        back = sorted(tp for tp, off in latest.items() if off < begin.get(tp, off))
        for t, p in back:
            report_data_loss(self.options, f"Partition {t}-{p}'s offset was changed from {begin[(t, p)]} to "
                             f"{latest[(t, p)]}. This could be either 1) a user error that the start offset is set "
                             "beyond available offset when starting query, or 2) the kafka topic-partition is "
                             "deleted and re-created", "KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED")
        return bool(back)

    def _aligned(self, begin: dict[TP, int], end: dict[TP, int], latest: dict[TP, int]) -> dict[TP, int]:
        """``alignByTimestamp``: the budget's cut moved back to the oldest first-unread record of the
        partitions it cut (:func:`align_to_time`)."""
        limited = [tp for tp in end if tp[0] not in self.options.unlimited_topics]
        cut = {tp: end[tp] for tp in limited if end[tp] < latest[tp]}
        stamps = {tp: ts for tp, ts in self.lookup.timestamps_at(cut, latest).items() if ts is not None}
        if not stamps:
            return end
        pivot = min(stamps, key=lambda tp: (stamps[tp], tp))
        firsts = self.lookup.offsets_for_times({tp: stamps[pivot] for tp in limited})
        return align_to_time(begin, end, firsts, pivot)

    def _enough(self, begin: dict[TP, int], latest: dict[TP, int], limit) -> bool:
        """minOffsetsPerTrigger, as Spark's Kafka source (``delayBatch``): a batch runs when that many
        offsets are new or maxTriggerDelay has passed since the last batch that ran. Spark's clock
        for that starts at 0, so the first trigger after every start runs with what there is."""
        wanted = limit.min_rows if isinstance(limit, ReadMinRows) else self.options.min_offsets_per_trigger
        if not wanted:
            return True
        now = self.clock()
        if (self._last_trigger is None or (now - self._last_trigger) * 1000 >= self.options.max_trigger_delay_ms
                or available(begin, latest) >= wanted):
            self._last_trigger = now
            return True
        return False

    def reportLatestOffset(self):
        # Spark asks right after latestOffset() for its progress report: answer what that call saw
        # (as Spark's Kafka source does) rather than ask the brokers again.
        return to_json(self._reported if self._reported is not None else self._latest())

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._latest()

    def partitions(self, start: dict, end: dict):
        begin, finish = from_json(start), from_json(end)
        new = [tp for tp in finish if tp not in begin]
        marks = self.lookup.watermarks(sorted(set(begin) | set(new)))
        begin.update({tp: marks[tp][0] for tp in new})
        begin = check_start(self.options, {tp: o for tp, o in begin.items() if tp in finish}, marks)
        return [InputPartition(s) for s in slices(begin, finish, self.options.min_partitions,
                                                    self.options.max_records_per_partition)]

    def read(self, partition):
        # With no slice to read (every partition empty) Spark still runs one task, whose partition
        # carries no value.
        if getattr(partition, "value", None) is not None:
            yield from read_slice(self.options, partition.value)

    def commit(self, end: dict) -> None:
        self.lookup.commit_group(from_json(end))

    def stop(self) -> None:
        if self._lookup is not None:
            self._lookup.close()
            self._lookup = None
