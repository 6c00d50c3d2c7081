"""The consumer: confluent-kafka's API over a background fetcher that prefetches Arrow batches.

    c = Consumer({"bootstrap.servers": "127.0.0.1:9092", "auto.offset.reset": "earliest"})
    c.assign([TopicPartition("orders", 0, OFFSET_BEGINNING)])
    msg = c.poll(1.0)           # one Message, or None
    table = c.poll_batch(1.0)   # everything prefetched, as one Arrow table

The fetcher thread keeps one long-poll Fetch in flight per broker for the assigned partitions,
decodes responses into Arrow (no per-record Python) and queues them until
``queued.max.messages.kbytes`` is reached. ``poll`` walks a queued batch record by record;
``poll_batch`` hands whole batches over. ``seek``/``assign`` bump a partition's generation so data
fetched for an old position is dropped, never returned.

A batch that cannot be decoded (CRC mismatch, a body that does not hold what its header says)
halts its partition: the records before it are delivered, then one error event at its offset
(``Message.error()`` is a ``CorruptRecordError`` whose ``details["next_offset"]`` is where the
batch ends), and the position stays at the bad batch until the application ``seek()``s, as Kafka's
consumer keeps failing at a corrupt record rather than skipping it silently.
"""
from __future__ import annotations

import collections
import concurrent.futures
import logging
import queue
import threading
import time
from dataclasses import dataclass

import grpc
import numpy as np
import pyarrow as pa

from broker.client.cluster import ClusterClient, ClusterMetadata, translate_rpc_error
from broker.client.config import CONSUMER_CONFIG
from broker.client.coordinator import CoordinatorClient
from broker.client.membership import GroupMembership
from broker.client.message import (OFFSET_BEGINNING, OFFSET_END, OFFSET_INVALID, OFFSET_STORED,
                                   TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Message,
                                   TopicPartition)
from broker.errors import (ClientClosedError, InvalidConfigError, OffsetOutOfRangeError, PartitionEOF,
                           RiverlogError, UnknownTopicOrPartitionError, error_for_code)
from broker.proto import riverlog_pb2 as pb
from broker.records.arrow_body import SCHEMA
from broker.records.reader import decode_available, next_fetch_offset

log = logging.getLogger(__name__)

EARLIEST, LATEST = -2, -1
_RESET = {"earliest": EARLIEST, "smallest": EARLIEST, "beginning": EARLIEST,
          "latest": LATEST, "largest": LATEST, "end": LATEST, "error": None, "none": None}

BATCH_SCHEMA = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
    ("timestamp", pa.int64()), ("timestamp_type", pa.int8()),
    ("key", pa.binary()), ("value", pa.binary()),
    ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
])


_NO_RECORDS = pa.RecordBatch.from_pylist([], schema=SCHEMA)


@dataclass(frozen=True)
class ConsumerGroupMetadata:
    """Who this consumer is in its group (handed to a transactional producer's offset commit)."""
    group_id: str
    member_id: str
    member_epoch: int
    group_instance_id: str


@dataclass
class _Chunk:
    """Decoded records of one partition awaiting the application."""
    topic: str
    partition: int
    generation: int
    base_offset: int
    records: pa.RecordBatch
    log_append_time: bool
    cursor: int = 0
    rows: tuple | None = None  # Python lists, made when poll() first walks the chunk
    end_offset: int = -1       # the position once the chunk is used up: past markers and aborted batches
    error: RiverlogError | None = None  # an error event in its place among the records (no rows)

    @property
    def remaining(self) -> int:
        return self.records.num_rows - self.cursor


class _PartitionState:
    __slots__ = ("fetch_offset", "position", "generation", "in_flight", "high_watermark",
                 "log_start_offset", "eof_reported", "paused", "halted")

    def __init__(self, offset: int):
        self.fetch_offset = offset
        self.position = offset
        self.generation = 0
        self.in_flight = False
        self.high_watermark = -1
        self.log_start_offset = -1
        self.eof_reported = False
        self.paused = False
        self.halted = False  # stopped at a batch it could not decode, until seek()/assign()


class Consumer:
    def __init__(self, config: dict, **kwargs):
        cfg = CONSUMER_CONFIG.parse({**config, **kwargs})
        self.config = cfg
        self.cluster = ClusterClient.from_config(cfg)
        self._reset = _RESET[cfg["auto.offset.reset"]]
        wait_ms = cfg["fetch.wait.max.ms"] if cfg["fetch.wait.max.ms"] is not None else cfg["fetch.max.wait.ms"]
        self._fetch_wait_ms = wait_ms
        self._queue_limit = cfg["queued.max.messages.kbytes"] * 1024
        self._cond = threading.Condition()
        self._state: dict[tuple[str, int], _PartitionState] = {}
        self._chunks: collections.deque[_Chunk] = collections.deque()
        self._events: collections.deque[Message] = collections.deque()
        self._queued_bytes = 0
        self._closed = False
        self._wake = threading.Event()
        self._arrivals: queue.SimpleQueue = queue.SimpleQueue()
        self._next_refresh = 0.0
        self._group_id = cfg["group.id"]
        self._coordinator = CoordinatorClient(self.cluster, self._group_id) if self._group_id else None
        self._membership: GroupMembership | None = None
        self._callbacks: dict = {}
        self._owned: set[tuple[str, int]] = set()
        self._committer: concurrent.futures.ThreadPoolExecutor | None = None
        self._last_auto_commit = time.monotonic()
        self._auto_committed: dict[tuple[str, int], int] = {}
        self._thread = threading.Thread(target=self._run_fetcher, name="riverlog-fetcher", daemon=True)
        self._thread.start()

    # --------------------------------------------------------------------------- assignment
    def assign(self, partitions: list[TopicPartition]) -> None:
        """Consume exactly these partitions, from their offsets (or auto.offset.reset)."""
        with self._cond:
            self._check_open()
            self._state = {}
            self._chunks.clear()
            self._queued_bytes = 0
            for tp in partitions:
                self._state[(tp.topic, tp.partition)] = _PartitionState(tp.offset)
        self._kick()

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        with self._cond:
            for tp in partitions:
                self._state[(tp.topic, tp.partition)] = _PartitionState(tp.offset)
        self._kick()

    def _kick(self) -> None:
        """Wake the fetch threads now (an assignment changed, or the consumer closes), rather than
        at their next timeout."""
        self._wake.set()
        self._arrivals.put([])

    def unassign(self) -> None:
        self.assign([])

    def assignment(self) -> list[TopicPartition]:
        with self._cond:
            return [TopicPartition(t, p) for t, p in self._state]

    # --------------------------------------------------------------------------- groups
    def subscribe(self, topics, on_assign=None, on_revoke=None, on_lost=None) -> None:
        """Join ``group.id`` and consume the partitions its coordinator assigns.

        The callbacks run inside ``poll()``: ``on_revoke(consumer, partitions)`` before partitions
        go (positions are committed first when ``enable.auto.commit``), ``on_assign(consumer,
        partitions)`` when partitions arrive (set a ``TopicPartition.offset`` there to start
        elsewhere than the committed offset), and ``on_lost(consumer, partitions)`` when they were
        taken away without a revocation (session expired, fenced); without ``on_lost``,
        ``on_revoke`` is called. With an eager assignor (range, roundrobin) every rebalance revokes
        everything; with ``cooperative-sticky`` only what moves.
        """
        self._check_open()
        if self._coordinator is None:
            raise InvalidConfigError("subscribe() needs group.id", config="group.id")
        if isinstance(topics, str):
            topics = [topics]
        if self._membership is not None:
            self.unsubscribe()
        self.assign([])
        self._callbacks = {"assign": on_assign, "revoke": on_revoke, "lost": on_lost}
        self._membership = GroupMembership(self._coordinator, self.config, list(topics), self._group_wake)

    def unsubscribe(self) -> None:
        """Give up every partition (``on_revoke``) and leave the group."""
        membership = self._membership
        if membership is None:
            return
        self._revoke(set(self._owned), lost=False)
        self._membership = None
        membership.close()

    def _group_wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _group_step(self) -> None:
        """Apply what the coordinator decided, on the application's thread (callbacks run here)."""
        membership = self._membership
        if membership is None:
            return
        membership.polled()
        self._maybe_auto_commit()
        assignment, lost, fatal = membership.pending()
        if fatal is not None:
            self._membership = None
            self._revoke(set(self._owned), lost=True)
            raise fatal
        if lost and self._owned:
            self._revoke(set(self._owned), lost=True)
            membership.applied(self._owned)
        revoked = self._owned - assignment
        if revoked:
            self._revoke(revoked, lost=False)
            membership.applied(self._owned)
        added = assignment - self._owned
        if added:
            try:
                committed = self._committed_offsets(added, self.config["request.timeout.ms"] / 1000.0)
            except RiverlogError as e:
                log.debug("could not read committed offsets yet: %r", e)
                return
            tps = [TopicPartition(t, p, committed.get((t, p), OFFSET_INVALID)) for t, p in sorted(added)]
            if self._callbacks.get("assign"):
                self._callbacks["assign"](self, tps)
            self.incremental_assign(tps)
            self._owned |= added
            membership.applied(self._owned)

    def _revoke(self, partitions: set, lost: bool) -> None:
        if not partitions:
            return
        tps = [TopicPartition(t, p) for t, p in sorted(partitions)]
        if not lost and self.config["enable.auto.commit"]:
            try:
                self._commit_sync(self._positions(partitions), 5.0)
            except RiverlogError as e:
                log.warning("auto-commit before revocation failed: %r", e)
        callback = (self._callbacks.get("lost") or self._callbacks.get("revoke")) if lost \
            else self._callbacks.get("revoke")
        if callback:
            callback(self, tps)
        self.incremental_unassign(tps)
        self._owned -= partitions

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        with self._cond:
            for tp in partitions:
                self._state.pop((tp.topic, tp.partition), None)
                self._drop_chunks(tp.topic, tp.partition)
        self._wake.set()

    def consumer_group_metadata(self) -> ConsumerGroupMetadata:
        member_id, epoch = self._membership.metadata() if self._membership is not None else ("", -1)
        return ConsumerGroupMetadata(self._group_id, member_id, epoch, self.config["group.instance.id"])

    # --------------------------------------------------------------------------- commits
    def commit(self, message: Message | None = None, offsets: list[TopicPartition] | None = None,
               asynchronous: bool = False):
        """Commit ``message.offset() + 1``, the given ``offsets``, or every assigned partition's
        position. Synchronous by default (returns the committed partitions, raises on failure);
        ``asynchronous=True`` returns at once and reports to the ``on_commit`` callback."""
        self._check_open()
        if self._coordinator is None:
            raise InvalidConfigError("commit() needs group.id", config="group.id")
        if message is not None:
            tps = [TopicPartition(message.topic(), message.partition(), message.offset() + 1)]
        elif offsets is not None:
            tps = list(offsets)
        else:
            with self._cond:
                tps = [TopicPartition(t, p, s.position) for (t, p), s in self._state.items() if s.position >= 0]
        if not asynchronous:
            return self._commit_sync(tps, self.config["request.timeout.ms"] / 1000.0)
        self._commit_async(tps)
        return None

    def _positions(self, partitions) -> list[TopicPartition]:
        with self._cond:
            return [TopicPartition(t, p, self._state[(t, p)].position) for t, p in sorted(partitions)
                    if (t, p) in self._state and self._state[(t, p)].position >= 0]

    def _commit_async(self, tps: list[TopicPartition]) -> None:
        if self._committer is None:
            self._committer = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="riverlog-commit")

        def run():
            error = None
            try:
                self._commit_sync(tps, self.config["request.timeout.ms"] / 1000.0)
            except RiverlogError as e:
                error = e
                log.debug("asynchronous commit failed: %r", e)
            callback = self.config["on_commit"]
            if callback is not None:
                callback(error, tps)
        self._committer.submit(run)

    def _commit_sync(self, tps: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        if not tps:
            return []
        member_id, epoch = self._membership.metadata() if self._membership is not None else ("", -1)
        by_topic: dict[str, list] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(pb.CommitPartition(
                partition=tp.partition, offset=tp.offset, metadata=tp.metadata or "",
                leader_epoch=-1 if tp.leader_epoch is None else tp.leader_epoch))
        request = pb.OffsetCommitRequest(group_id=self._group_id, member_id=member_id, member_epoch=epoch,
                                         topics=[pb.CommitTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
        deadline = time.monotonic() + timeout
        while True:
            response = self._coordinator.call("OffsetCommit", request, max(0.1, deadline - time.monotonic()))
            failed = next((r for r in response.results if r.error_code), None)
            if failed is None:
                with self._cond:
                    for tp in tps:
                        self._auto_committed[(tp.topic, tp.partition)] = tp.offset
                return tps
            error = error_for_code(failed.error_code)(failed.error_message)
            if not error.retriable or time.monotonic() >= deadline:
                raise error
            self._coordinator.forget()
            time.sleep(self.config["retry.backoff.ms"] / 1000.0)
            member_id, epoch = self._membership.metadata() if self._membership is not None else ("", -1)
            request.member_id, request.member_epoch = member_id, epoch

    def _maybe_auto_commit(self) -> None:
        if not self.config["enable.auto.commit"]:
            return
        now = time.monotonic()
        if (now - self._last_auto_commit) * 1000 < self.config["auto.commit.interval.ms"]:
            return
        self._last_auto_commit = now
        with self._cond:
            moved = [TopicPartition(t, p, s.position) for (t, p), s in self._state.items()
                     if s.position >= 0 and self._auto_committed.get((t, p)) != s.position]
        if moved:
            self._commit_async(moved)

    def committed(self, partitions: list[TopicPartition], timeout: float | None = None) -> list[TopicPartition]:
        """The group's committed offset of each partition (``OFFSET_INVALID`` where there is none)."""
        self._check_open()
        if self._coordinator is None:
            raise InvalidConfigError("committed() needs group.id", config="group.id")
        found = self._committed_offsets({(tp.topic, tp.partition) for tp in partitions},
                                        self.config["request.timeout.ms"] / 1000.0 if timeout is None else timeout,
                                        with_metadata=True)
        out = []
        for tp in partitions:
            offset, metadata = found.get((tp.topic, tp.partition), (OFFSET_INVALID, None))
            out.append(TopicPartition(tp.topic, tp.partition, offset, metadata))
        return out

    def _committed_offsets(self, partitions, timeout: float, with_metadata: bool = False) -> dict:
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(partitions):
            by_topic.setdefault(t, []).append(p)
        request = pb.OffsetFetchRequest(group_id=self._group_id, partitions=[
            pb.GroupPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()])
        response = self._coordinator.call("OffsetFetch", request, timeout)
        if with_metadata:
            return {(o.topic, o.partition): (o.offset, o.metadata) for o in response.offsets}
        return {(o.topic, o.partition): o.offset for o in response.offsets}

    def seek(self, partition: TopicPartition) -> None:
        """Move an assigned partition's position; data already fetched for it is discarded."""
        with self._cond:
            state = self._state.get((partition.topic, partition.partition))
            if state is None:
                raise RiverlogError(f"{partition.topic}[{partition.partition}] is not assigned")
            state.generation += 1
            state.fetch_offset = state.position = partition.offset
            state.eof_reported = False
            state.halted = False
            self._drop_chunks(partition.topic, partition.partition)
        self._wake.set()

    def _drop_chunks(self, topic: str, partition: int) -> None:
        kept = collections.deque()
        for chunk in self._chunks:
            if (chunk.topic, chunk.partition) == (topic, partition):
                self._queued_bytes -= chunk.records.nbytes
            else:
                kept.append(chunk)
        self._chunks = kept

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """The offset of the next record poll() returns for each partition."""
        with self._cond:
            out = []
            for tp in partitions:
                state = self._state.get((tp.topic, tp.partition))
                out.append(TopicPartition(tp.topic, tp.partition, state.position if state else OFFSET_INVALID))
            return out

    def pause(self, partitions: list[TopicPartition]) -> None:
        with self._cond:
            for tp in partitions:
                state = self._state.get((tp.topic, tp.partition))
                if state:
                    state.paused = True

    def resume(self, partitions: list[TopicPartition]) -> None:
        with self._cond:
            for tp in partitions:
                state = self._state.get((tp.topic, tp.partition))
                if state:
                    state.paused = False
        self._wake.set()

    # --------------------------------------------------------------------------- reading
    def poll(self, timeout: float | None = None) -> Message | None:
        """The next record (or error event), waiting up to ``timeout`` seconds."""
        deadline = _deadline(timeout)
        while True:
            self._group_step()
            with self._cond:
                self._check_open()
                if self._events:
                    return self._events.popleft()
                chunk = self._next_chunk()
                if chunk is not None:
                    return self._take_one(chunk)
                if not self._wait(deadline):
                    return None

    def consume(self, num_messages: int = 1, timeout: float | None = -1) -> list[Message]:
        """Up to ``num_messages`` records, waiting up to ``timeout`` s for the first."""
        deadline = _deadline(timeout)
        out: list[Message] = []
        while True:
            self._group_step()
            with self._cond:
                while len(out) < num_messages:
                    self._check_open()
                    if self._events:
                        out.append(self._events.popleft())
                        continue
                    chunk = self._next_chunk()
                    if chunk is None:
                        break
                    out.append(self._take_one(chunk))
                if out or not self._wait(deadline):
                    return out

    def poll_batch(self, timeout: float | None = None, max_records: int | None = None) -> pa.Table | None:
        """Every prefetched record (up to ``max_records``) as one Arrow table (``BATCH_SCHEMA``).

        Returns None when nothing arrived in time. Error events are raised, not returned.
        """
        deadline = _deadline(timeout)
        parts = []
        taken = 0
        while not parts:
            self._group_step()
            with self._cond:
                while True:
                    self._check_open()
                    if self._events:
                        event = self._events.popleft()
                        if parts:
                            self._events.appendleft(event)
                            break
                        raise event.error()
                    chunk = self._next_chunk()
                    if chunk is None:
                        break
                    if chunk.error is not None:
                        if parts:
                            break
                        raise self._take_one(chunk).error()
                    n = chunk.remaining if max_records is None else min(chunk.remaining, max_records - taken)
                    parts.append(self._slice(chunk, n))
                    taken += n
                    if max_records is not None and taken >= max_records:
                        break
                if not parts and not self._wait(deadline):
                    return None
        return pa.Table.from_batches(parts, schema=BATCH_SCHEMA)

    def _next_chunk(self) -> _Chunk | None:
        while self._chunks:
            chunk = self._chunks[0]
            state = self._state.get((chunk.topic, chunk.partition))
            if state is None or state.generation != chunk.generation or (chunk.remaining == 0
                                                                         and chunk.error is None):
                self._chunks.popleft()
                self._queued_bytes -= chunk.records.nbytes
                self._wake.set()
                continue
            return chunk
        return None

    def _take_one(self, chunk: _Chunk) -> Message:
        if chunk.error is not None:
            self._chunks.popleft()  # the position already stands at the bad batch
            return Message(chunk.topic, chunk.partition, chunk.base_offset, error=chunk.error)
        if chunk.rows is None:
            r = chunk.records
            chunk.rows = (r.column(0).to_pylist(), r.column(1).to_pylist(), r.column(2).to_pylist(),
                          r.column(3).to_pylist() if r.column(3).null_count < r.num_rows else None)
        keys, values, stamps, headers = chunk.rows
        i = chunk.cursor
        chunk.cursor += 1
        offset = chunk.base_offset + i
        self._state[(chunk.topic, chunk.partition)].position = max(offset + 1, chunk.end_offset) \
            if chunk.cursor == chunk.records.num_rows else offset + 1
        h = headers[i] if headers is not None else None
        return Message(chunk.topic, chunk.partition, offset, keys[i], values[i],
                       None if h is None else [(e["key"], e["value"]) for e in h], stamps[i],
                       TIMESTAMP_LOG_APPEND_TIME if chunk.log_append_time else TIMESTAMP_CREATE_TIME)

    def _slice(self, chunk: _Chunk, n: int) -> pa.RecordBatch:
        records = chunk.records.slice(chunk.cursor, n)
        start = chunk.base_offset + chunk.cursor
        chunk.cursor += n
        self._state[(chunk.topic, chunk.partition)].position = max(start + n, chunk.end_offset) \
            if chunk.cursor == chunk.records.num_rows else start + n
        return pa.RecordBatch.from_arrays([
            pa.repeat(pa.scalar(chunk.topic, pa.string()), n),  # typed: untyped repeat re-imports each call
            pa.array(np.full(n, chunk.partition, dtype=np.int32)),
            pa.array(np.arange(start, start + n, dtype=np.int64)),
            records.column(2),
            pa.array(np.full(n, 1 if chunk.log_append_time else 0, dtype=np.int8)),
            records.column(0), records.column(1), records.column(3),
        ], schema=BATCH_SCHEMA)

    def _wait(self, deadline: float | None) -> bool:
        remaining = None if deadline is None else deadline - time.monotonic()
        if remaining is not None and remaining <= 0:
            return False
        self._cond.wait(remaining)
        return True

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the consumer is closed")

    # --------------------------------------------------------------------------- offsets
    def get_watermark_offsets(self, partition: TopicPartition, timeout: float | None = None,
                              cached: bool = False) -> tuple[int, int]:
        """(low, high): the log start offset and the high watermark."""
        if cached:
            state = self._state.get((partition.topic, partition.partition))
            return (state.log_start_offset, state.high_watermark) if state else (-1, -1)
        low = self._list_offset(partition.topic, partition.partition, EARLIEST, timeout)[0]
        high = self._list_offset(partition.topic, partition.partition, LATEST, timeout)[0]
        return low, high

    def offsets_for_times(self, partitions: list[TopicPartition], timeout: float | None = None):
        """For each partition (offset = a timestamp in ms): the first offset at or after it, or -1."""
        out = []
        for tp in partitions:
            offset, _ = self._list_offset(tp.topic, tp.partition, tp.offset, timeout)
            out.append(TopicPartition(tp.topic, tp.partition, offset))
        return out

    def _list_offset(self, topic: str, partition: int, timestamp: int, timeout=None) -> tuple[int, int]:
        request = pb.ListOffsetsRequest(
            isolation_level=1 if self.config["isolation.level"] == "read_committed" else 0,
            topics=[pb.ListOffsetsTopic(name=topic, partitions=[
                pb.ListOffsetsPartition(partition=partition, timestamp=timestamp)])])
        # Leadership may be moving: retriable errors refresh metadata and try again until the deadline.
        deadline = time.monotonic() + (60.0 if timeout is None else timeout)
        while True:
            try:
                node = self.cluster.leader(topic, partition)
                response = self.cluster.call("ListOffsets", request, node, timeout)
                r = response.topics[0].partitions[0]
                if r.error_code:
                    raise error_for_code(r.error_code)(r.error_message)
                return r.offset, r.timestamp
            except RiverlogError as e:
                if not e.retriable or time.monotonic() >= deadline:
                    raise
            time.sleep(min(self.config["retry.backoff.ms"] / 1000.0, max(0.0, deadline - time.monotonic())))
            self._refresh_quietly()

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        return self.cluster.snapshot([topic] if topic else None, None if timeout < 0 else timeout)

    # --------------------------------------------------------------------------- fetcher
    def _run_fetcher(self) -> None:
        """Decode what the per-broker fetch threads bring in, in arrival order.

        Each broker leading an assigned partition gets a thread that keeps one blocking
        long-poll fetch in flight (as librdkafka has a thread per broker): a quiet broker never
        delays another, and a broker's next fetch goes out while this thread decodes the last.
        """
        fetchers: dict[int, threading.Thread] = {}
        while not self._closed:
            try:
                self._start_fetchers(fetchers)
                try:
                    arrived = self._arrivals.get(timeout=0.1)
                except queue.Empty:
                    continue
                self._queue_records(arrived)
            except ClientClosedError:
                return
            except Exception:  # noqa: BLE001 - keep serving; corrupt batches are events (_halt), this is a bug
                log.exception("consumer decode failed")

    def _start_fetchers(self, fetchers: dict) -> None:
        with self._cond:
            keys = [k for k, state in self._state.items() if not state.paused]
        stale = False
        for key in keys:
            try:
                node = self.cluster.leader(*key)
            except UnknownTopicOrPartitionError as e:
                self._report_unknown(key, e)
                continue
            except RiverlogError:  # e.g. no leader in the metadata we hold: ask again, at most every backoff
                stale = True
                continue
            if node not in fetchers or not fetchers[node].is_alive():
                fetchers[node] = threading.Thread(target=self._run_broker_fetcher, args=(node,),
                                                  name=f"riverlog-fetch-{node}", daemon=True)
                fetchers[node].start()
        now = time.monotonic()
        if stale and now >= self._next_refresh:
            self._next_refresh = now + self.config["retry.backoff.ms"] / 1000.0
            self._refresh_quietly()

    def _report_unknown(self, key, error: RiverlogError) -> None:
        """An assigned partition that does not exist: one error event, then it is paused."""
        self._refresh_quietly()
        if key[0] in self.cluster.topics and key[1] in self.cluster.topics[key[0]].partitions:
            return
        with self._cond:
            state = self._state.get(key)
            if state is None or state.paused:
                return
            state.paused = True
        self._error_event(key, error)

    def _run_broker_fetcher(self, node: int) -> None:
        backoff = self.config["retry.backoff.ms"] / 1000.0
        while not self._closed:
            try:
                parts = self._fetchable(node)
                if not parts:
                    self._wake.wait(0.05)
                    self._wake.clear()
                    continue
                try:
                    response = self._fetch(node, parts)
                except grpc.RpcError as e:
                    raise translate_rpc_error(e, "Fetch") from None
                self._arrivals.put(self._advance(response, parts))
            except ClientClosedError:
                return
            except RiverlogError:
                if self._closed:
                    return
                self._wake.wait(backoff)
                self._refresh_quietly()
            except Exception:  # noqa: BLE001 - keep fetching; the next round retries
                log.exception("consumer fetch from broker %d failed", node)
                self._wake.wait(backoff)

    def _refresh_quietly(self) -> None:
        try:
            self.cluster.refresh()
        except RiverlogError:
            pass

    def _fetchable(self, node: int) -> list:
        """(partition, fetch offset, generation) of assigned partitions this broker leads."""
        with self._cond:
            if self._queued_bytes >= self._queue_limit:
                return []
            wanted = [(k, s) for k, s in self._state.items() if not (s.paused or s.halted)]
        parts = []
        for key, state in wanted:
            if self.cluster.leader(*key) != node:
                continue
            if state.fetch_offset < 0:
                self._resolve_position(key, state)
                if state.fetch_offset < 0:
                    continue
            parts.append((key, state.fetch_offset, state.generation))
        return parts

    def _fetch(self, node: int, parts) -> pb.FetchResponse:
        cfg = self.config
        request = pb.FetchRequest(replica_id=-1, max_wait_ms=self._fetch_wait_ms, min_bytes=cfg["fetch.min.bytes"],
                                  max_bytes=cfg["fetch.max.bytes"],
                                  isolation_level=1 if cfg["isolation.level"] == "read_committed" else 0)
        topics: dict[str, pb.FetchTopic] = {}
        for (topic, partition), offset, _ in parts:
            t = topics.get(topic) or topics.setdefault(topic, request.topics.add(name=topic))
            t.partitions.add(partition=partition, fetch_offset=offset, max_bytes=cfg["max.partition.fetch.bytes"])
        timeout = self._fetch_wait_ms / 1000.0 + self.config["request.timeout.ms"] / 1000.0
        return self.cluster.stub(node).Fetch.with_call(request, timeout=timeout)[0]

    def _resolve_position(self, key, state: _PartitionState) -> None:
        target = state.fetch_offset
        if target in (OFFSET_STORED, OFFSET_INVALID):
            target = self._reset
            if target is None:
                self._error_event(key, OffsetOutOfRangeError(f"{key[0]}[{key[1]}] has no position and "
                                                             "auto.offset.reset=error"))
                state.paused = True
                return
        if target == OFFSET_BEGINNING:
            target = EARLIEST
        elif target == OFFSET_END:
            target = LATEST
        offset, _ = self._list_offset(key[0], key[1], target)
        with self._cond:
            if state.fetch_offset < 0:
                state.fetch_offset = state.position = offset

    def _advance(self, response: pb.FetchResponse, parts) -> list:
        """Move fetch positions past what arrived (headers only); return the data to decode."""
        requested = {key: (offset, gen) for key, offset, gen in parts}
        arrived = []
        for t in response.topics:
            for r in t.partitions:
                key = (t.name, r.partition)
                offset, generation = requested.get(key, (0, -1))
                if r.error_code:
                    self._fetch_error(key, generation, r)
                    continue
                next_offset = next_fetch_offset(r.records)
                with self._cond:
                    state = self._state.get(key)
                    if state is None or state.generation != generation or state.halted:
                        continue
                    state.high_watermark, state.log_start_offset = r.high_watermark, r.log_start_offset
                    if next_offset is not None:
                        state.fetch_offset = next_offset
                arrived.append((key, generation, offset, r, next_offset))
        return arrived

    def _queue_records(self, arrived: list) -> None:
        check = self.config["check.crcs"]
        for key, generation, offset, r, following in arrived:
            aborted = [(a.producer_id, a.first_offset) for a in r.aborted_transactions]
            decoded, failure = decode_available(r.records, offset, check, aborted) if r.records else ([], None)
            with self._cond:
                state = self._state.get(key)
                if state is None or state.generation != generation or state.halted:
                    continue
                for d in decoded:
                    if d.records.num_rows:
                        self._chunks.append(_Chunk(key[0], key[1], generation, d.base_offset,
                                                   d.records, d.log_append_time))
                        self._queued_bytes += d.records.nbytes
                if failure is not None:
                    self._halt(key, state, max(failure.offset, offset), failure.error)
                    continue
                self._skip_past(key, state, following)
                if decoded:
                    state.eof_reported = False
                    self._cond.notify_all()
                elif (self.config["enable.partition.eof"] and not state.eof_reported
                      and state.fetch_offset >= r.high_watermark and state.position >= r.high_watermark):
                    state.eof_reported = True
                    self._events.append(Message(key[0], key[1], r.high_watermark,
                                                error=PartitionEOF(f"reached end of {key[0]}[{key[1]}]")))
                    self._cond.notify_all()

    def _halt(self, key, state: _PartitionState, at: int, error: RiverlogError) -> None:
        """Stop the partition at a batch it cannot decode: fetch nothing past it, let the records
        before it be taken, then report it (an error chunk, so the event keeps its place)."""
        state.halted = True
        state.fetch_offset = at
        self._skip_past(key, state, at)
        self._chunks.append(_Chunk(key[0], key[1], state.generation, at, _NO_RECORDS, False, error=error))
        log.warning("%s[%d]: %s", key[0], key[1], error)
        self._cond.notify_all()

    def _skip_past(self, key, state: _PartitionState, following: int | None) -> None:
        """Offsets that hold no record for the application (transaction markers, aborted
        transactions) still move the position past them, once the records before them are taken.
        ``following``: the offset after the fetched data's last batch."""
        if following is None:
            return
        last = next((c for c in reversed(self._chunks) if (c.topic, c.partition) == key
                     and c.generation == state.generation), None)
        if last is not None and last.remaining:
            last.end_offset = max(last.end_offset, following)
        elif following > state.position >= 0:
            state.position = following

    def _fetch_error(self, key, generation, r) -> None:
        error = error_for_code(r.error_code)(r.error_message)
        if isinstance(error, OffsetOutOfRangeError):
            with self._cond:
                state = self._state.get(key)
                if state is None or state.generation != generation:
                    return
                if self._reset is None:
                    state.paused = True
                    self._error_event(key, error)
                    return
                state.fetch_offset = state.position = r.log_start_offset if self._reset == EARLIEST \
                    else r.log_end_offset
                state.generation += 1
            return
        if error.retriable:
            self._refresh_quietly()
            return
        self._error_event(key, error)

    def _error_event(self, key, error: RiverlogError) -> None:
        with self._cond:
            self._events.append(Message(key[0], key[1], -1, error=error))
            self._cond.notify_all()

    # --------------------------------------------------------------------------- lifecycle
    def close(self) -> None:
        """Leave the group (committing positions first when ``enable.auto.commit``), then stop."""
        if not self._closed and self._membership is not None:
            try:
                self.unsubscribe()
            except RiverlogError as e:
                log.warning("leaving the group on close failed: %r", e)
        if self._committer is not None:
            self._committer.shutdown(wait=True)
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        self._kick()
        self.cluster.close()
        self._thread.join(5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _deadline(timeout: float | None) -> float | None:
    if timeout is None or timeout < 0:
        return None
    return time.monotonic() + timeout
