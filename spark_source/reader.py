"""Batch and streaming readers: plan offset ranges on the driver, read them as Arrow on executors.

The driver asks the broker for partitions and watermarks (a read_committed query stops at each
partition's last stable offset) and cuts the work into :class:`~spark_source.planning.Slice`\\ s;
each Spark task reads one slice with a Riverlog consumer and hands Spark Arrow record batches in
the Kafka source's schema. Gaps in offsets (compaction, transaction markers, aborted records) are
normal and never reported as data loss; offsets below a partition's log start (retention,
DeleteRecords), a topic that disappeared, a latest offset below the query's position, an added
partition that does not start at 0 and a task's range the partition no longer holds are (Spark's
``reportDataLoss`` cases), and fail the query
unless ``failOnDataLoss=false``. The driver never creates a topic. Its questions to the brokers
and those data-loss checks are :mod:`spark_source.offset_lookup`'s, re-exported here.

After each micro-batch the source commits its end offsets to the broker consumer group
``groupId``, so ``riverlog groups describe`` shows the query's lag; Spark's checkpoint stays the
source of truth for recovery.
"""
from __future__ import annotations

import logging
import time

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadMaxRows, ReadMinRows,
                                              SupportsTriggerAvailableNow)

from broker.errors import OffsetOutOfRangeError, RiverlogError
from spark_source.offset_lookup import (START_PIN, DataLossError, OffsetLookup,  # noqa: F401 (re-exported)
                                        check_batch_range, check_start, per_partition, report_data_loss,
                                        retrying, settled_latest)
from spark_source.options import SourceOptions
from spark_source.planning import TP, Slice, align_to_time, available, from_json, rate_limit, slices, to_json

log = logging.getLogger(__name__)

_HEADER_TYPE = pa.list_(pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())])))


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
                table, resume = None, _resume_at(options, consumer, piece, position)
                if resume is None:
                    return
                consumer.seek(TopicPartition(piece.topic, piece.partition, resume))
                if resume > position:
                    position, last_progress = resume, time.monotonic()
            if table is not None and table.num_rows:
                if table["offset"][-1].as_py() >= piece.until:  # offsets rise: filter only an overshoot
                    table = table.filter(pc.less(table["offset"], piece.until))
                if table.num_rows:
                    yield from to_spark(table, options.include_headers)
            moved = consumer.position([TopicPartition(piece.topic, piece.partition)])[0].offset
            if moved > position:
                position, last_progress = moved, time.monotonic()
            elif (time.monotonic() - last_progress) * 1000 > options.poll_timeout_ms:
                resume = _resume_at(options, consumer, piece, position)
                if resume is None:
                    return
                if resume == position:
                    raise RiverlogError(f"no record of {piece.topic}-{piece.partition} at or after offset {position} "
                                        f"(wanted up to {piece.until}) arrived within kafkaConsumer.pollTimeoutMs="
                                        f"{options.poll_timeout_ms}")
                consumer.seek(TopicPartition(piece.topic, piece.partition, resume))
                position, last_progress = resume, time.monotonic()
    finally:
        consumer.close()


def _resume_at(options: SourceOptions, consumer, piece: Slice, position: int) -> int | None:
    """Where a task goes on when ``position`` was out of range or nothing arrived for
    ``kafkaConsumer.pollTimeoutMs`` (Spark's ``KafkaDataConsumer.getEarliestAvailableOffsetBetween``):
    None when the partition holds nothing of the rest of the range (it ends before ``position``,
    its topic deleted and created again, or an ``endingOffsets`` past its end; or all of it was
    removed), its log start when only the head was removed, else ``position`` itself. What is
    skipped is data loss: it fails the task unless ``failOnDataLoss=false``."""
    from broker.client import TopicPartition
    low, high = consumer.get_watermark_offsets(TopicPartition(piece.topic, piece.partition), 30)
    where = f"{piece.topic}-{piece.partition}"
    if position >= high or low >= piece.until:
        message = (f"offsets [{position}, {piece.until}) of {where} are not in the partition, which holds "
                   f"[{low}, {high}) (records removed, the topic deleted and created again, or an end past "
                   "the partition's end)")
    elif position < low:
        message = (f"offsets [{position}, {low}) of {where} were removed (retention or DeleteRecords) while the "
                   "query was reading them")
    else:
        return position
    if options.fail_on_data_loss:
        raise DataLossError(message + "; set failOnDataLoss=false to skip them with a warning")
    log.warning("%s; skipping them (failOnDataLoss=false)", message)
    return None if position >= high or low >= piece.until else low


# ---------------------------------------------------------------------------------- readers
class BatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions):
        self.options = options

    def partitions(self):
        lookup = OffsetLookup(self.options)
        try:
            tps = lookup.partitions()
            if not tps:   # a subscribePattern that matches no topic: an empty read, as in Spark
                return []
            start, end = lookup.starting(tps), lookup.ending(tps)
            check_batch_range(start, end)
            start = check_start(self.options, start, lookup.watermarks(tps))
        finally:
            lookup.close()
        return [InputPartition(s) for s in slices(start, end, self.options.min_partitions,
                                                    self.options.max_records_per_partition)]

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
        self._target_from_start = False             # AvailableNow: the end was fixed again from batch 0's start
        self._last_trigger: float | None = None     # minOffsetsPerTrigger: when a batch last ran (None: not yet)
        self._initial: dict[TP, int] | None = None   # batch 0's start, as initialOffset answered it
        self._reported: dict[TP, int] | None = None  # the latest offsets latestOffset() saw
        self._added_seen: dict[TP, int] = {}          # added partitions' first offsets, already checked

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
        if self._target is not None and not self._target_from_start:
            # Trigger.AvailableNow: Spark prepared the run before asking for its start, and records
            # produced in between put ``latest`` (or a timestamp's offset) past the end fixed then.
            # Fixed again from the start, as Spark's Kafka source fixes it: never below it. Once:
            # Spark asks for batch 0's start again when it plans that batch, and an end moved then
            # would take in what producers wrote after the run began.
            self._target, self._target_from_start = self._latest(pinned), True
        return to_json(pinned)

    def getDefaultReadLimit(self):
        if self.options.max_offsets_per_trigger:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        if self.options.min_offsets_per_trigger:
            return ReadMinRows(self.options.min_offsets_per_trigger)
        return ReadAllAvailable()

    def _latest(self, known: dict[TP, int] | None = None) -> dict[TP, int]:
        def fetch() -> dict[TP, int]:
            return {tp: marks[1] for tp, marks in self.lookup.watermarks(self.lookup.partitions()).items()}
        return settled_latest(fetch, known, self.options.fetch_offset_attempts,
                              self.options.fetch_offset_retry_interval_ms)

    def latestOffset(self, start: dict, limit) -> dict:
        begin = from_json(start)
        latest = self._reported = self._latest(begin)
        # The batch that ended at ``start`` is done; batch 0's start stays pinned until batch 0 is. A
        # deleted topic's partitions are left out: the coordinator refuses them until the commit times out.
        self.lookup.commit_group({tp: o for tp, o in begin.items() if tp in latest}, pin=begin == self._initial)
        gone = sorted(set(begin) - set(latest))
        if gone:
            message = f"partitions {', '.join(f'{t}-{p}' for t, p in gone)} disappeared (topic deleted?)"
            if self.options.fail_on_data_loss:
                raise DataLossError(message + "; set failOnDataLoss=false to go on without them")
            log.warning("%s; going on without them (failOnDataLoss=false)", message)
        if self._target is not None:   # AvailableNow: the run's end, partitions added since left to the next run
            latest = self._reported = {tp: min(off, self._target[tp]) for tp, off in latest.items()
                                       if tp in self._target}
        # Partitions added to a topic are read from their start (as Spark's Kafka source does).
        new = [tp for tp in latest if tp not in begin]
        if new:
            added = {tp: marks[0] for tp, marks in self.lookup.watermarks(new).items()}
            self._check_added(added)
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

    def _check_added(self, added: dict[TP, int]) -> None:
        """Spark's ``KAFKA_DATA_LOSS.ADDED_PARTITION_DOES_NOT_START_FROM_OFFSET_ZERO``: a partition new
        to the query is read from its first offset, and records before it were never read. Checked
        where the batch is planned too (as Spark's ``planInputPartitions`` checks it): a batch replayed
        after a restart reads its added partitions from their first offset then, which retention may
        have moved since. A first offset already reported is not reported twice."""
        for (t, p), first in sorted(added.items()):
            if first != 0 and self._added_seen.get((t, p)) != first:
                report_data_loss(self.options, f"Added partition {t}-{p} starts from {first} instead of 0. "
                                 "Some data may have been missed",
                                 "KAFKA_DATA_LOSS.ADDED_PARTITION_DOES_NOT_START_FROM_OFFSET_ZERO")
                self._added_seen[(t, p)] = first

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
        for that starts at 0, so the first trigger after every start runs with what there is. A
        ``Trigger.AvailableNow`` run never waits: it ends at the first trigger that reads nothing, so a
        delayed batch would end it short of the end it fixed, with records it was started to read unread."""
        wanted = limit.min_rows if isinstance(limit, ReadMinRows) else self.options.min_offsets_per_trigger
        if not wanted or self._target is not None:
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
        self._target, self._target_from_start = self._latest(self._initial), False

    def partitions(self, start: dict, end: dict):
        begin, finish = from_json(start), from_json(end)
        new = [tp for tp in finish if tp not in begin]
        # Only the batch's partitions: one its end left out (its topic deleted, failOnDataLoss=false)
        # has no watermarks to ask for.
        marks = self.lookup.watermarks(sorted(finish))
        added = {tp: marks[tp][0] for tp in new}
        self._check_added(added)
        begin.update(added)
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
