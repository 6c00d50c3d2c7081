"""The producer: confluent-kafka's API over an accumulator and one sender thread.

    p = Producer({"bootstrap.servers": "127.0.0.1:9092", "acks": "all", "linger.ms": 5})
    p.produce("orders", value=b"...", key=b"user-1", on_delivery=lambda err, msg: ...)
    p.produce_batch("orders", arrow_table)   # key/value/timestamp/headers columns
    p.flush(10)

Delivery callbacks run in the application's thread, inside ``poll()`` and ``flush()``, as with
confluent-kafka. Requests to a broker travel on one ordered gRPC stream, handled in order like a
Kafka connection, with up to ``max.in.flight.requests.per.connection`` unanswered.

A failed batch goes back into its partition's queue at its place in produce order (its
``sequence``), however the failures of a broken stream are reported. A partition has one request
unanswered at most while it is unsteady: while batches of it are being retried, and for two seconds
(``_SETTLE_S``) after a retriable failure of it or after its broker's stream was reopened. A
broker that is starting (loading its logs, fenced, made leader again), or whose leadership moves
and comes back, fails some requests of a partition and accepts the next ones: a later request
already in flight would be written before the failed one. Broken streams and broker restarts
therefore do not reorder a partition. As in Kafka without idempotence, one case remains: when the
broker fails a steady partition's batch alone (a per-partition error) and accepts a later request
of it that was already in flight, that one is written first; set
``max.in.flight.requests.per.connection`` to 1 for strict order then.

An idempotent producer also keeps a partition's unanswered batches within the broker's
``IDEMPOTENCE_WINDOW``: after a broken stream or a broker restart it resends them, and the broker
recognises a resent batch as already written only while it is among the ones it remembers.

Epochs come only from the broker (InitProducerId), never from the producer itself: a producer that
needs a new one (it gave up on a batch it had sent, or a partition forgot it: KIP-360) sends its
current producer id and epoch and takes the answer. A transactional producer does so after
aborting, and its coordinator refuses a producer that was fenced meanwhile; a fenced
transactional producer (``ProducerFenced``, or ``InvalidProducerEpoch`` from a partition) is
fatal: see :mod:`broker.client.transactions`.
"""
from __future__ import annotations

import collections
import itertools
import logging
import math
import queue
import threading
import time

import grpc

from broker.client.accumulator import (RECORD_OVERHEAD, ProducerBatch, StickyPartitioner, TopicBuffer,
                                       _TableChunk, assign_partitions, build_batches, normalise_table,
                                       record_sizes)
from broker.client.cluster import ClusterClient, ClusterMetadata, translate_rpc_error
from broker.client.config import PRODUCER_CONFIG
from broker.client.message import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Message
from broker.client.transactions import TransactionManager
from broker.errors import (ClientClosedError, InvalidConfigError, InvalidProducerEpochError, KafkaTimeoutError,
                           MessageTooLargeError, NetworkError, OutOfOrderSequenceError, ProducerFencedError,
                           QueueFullError, RiverlogError, UnknownPartitionError, UnknownProducerIdError,
                           UnknownTopicOrPartitionError, error_for_code)
from broker.proto import riverlog_pb2 as pb
from broker.records.batch import IDEMPOTENCE_WINDOW, stamp_producer

log = logging.getLogger(__name__)

_ACKS = {"0": 0, "1": 1, "all": -1, "-1": -1}
# How long a partition stays unsteady (see above): a restarting broker settles well within it.
_SETTLE_S = 2.0


class Producer:
    def __init__(self, config: dict, **kwargs):
        cfg = PRODUCER_CONFIG.parse({**config, **kwargs})
        self.config = cfg
        self._acks = _ACKS[cfg["acks"]]
        self._idempotent = _idempotence(cfg, self._acks)
        if cfg["transactional.id"] and not self._idempotent:
            raise InvalidConfigError("transactional.id needs idempotence (acks=all, enable.idempotence not false)",
                                     config="transactional.id")
        self._linger = cfg["linger.ms"] / 1000.0
        self._batch_size = cfg["batch.size"]
        self._max_message = cfg["message.max.bytes"]
        self._max_record = self._max_message + RECORD_OVERHEAD
        self._buffer_memory = cfg["buffer.memory"]
        self._default_cb = cfg["on_delivery"]
        self.cluster = ClusterClient.from_config(cfg)
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._wakeup = False
        self._buffers: dict[str, TopicBuffer] = {}
        self._buffered_bytes = 0
        self._outstanding = 0
        self._flushing = 0
        self._closed = False
        self._reports: collections.deque = collections.deque()
        self._report_cond = threading.Condition()
        self._txn = TransactionManager(self, cfg["transactional.id"]) if cfg["transactional.id"] else None
        self._sender = _Sender(self)
        self._thread = threading.Thread(target=self._sender.run, name="riverlog-producer", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------------------ transactions
    def init_transactions(self, timeout: float | None = None) -> None:
        """Get this transactional.id's producer id and a new epoch (fencing older instances, and
        aborting a transaction one of them left open)."""
        self._transactional().init(timeout)

    def begin_transaction(self) -> None:
        self._transactional().begin()

    def send_offsets_to_transaction(self, positions, group_metadata, timeout: float | None = None) -> None:
        """Commit a consumer's positions as part of this transaction (they count only if it commits)."""
        self._transactional().send_offsets(positions, group_metadata, timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush, then commit: every record and offset of the transaction becomes visible at once."""
        self._transactional().end(True, timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Flush, then abort: ``read_committed`` consumers never see this transaction's records."""
        self._transactional().end(False, timeout)

    def _transactional(self) -> TransactionManager:
        if self._txn is None:
            raise InvalidConfigError("transactions need transactional.id", config="transactional.id")
        return self._txn

    # ------------------------------------------------------------------------------ producing
    def produce(self, topic, value=None, key=None, partition=-1, on_delivery=None, timestamp=0,
                headers=None, callback=None):
        """Queue one record; raises BufferError (QueueFullError) when buffer.memory is used up."""
        # The hot path of per-record producing: keep it to a few C-level operations.
        if value is not None and type(value) is not bytes:
            value = _as_bytes(value)
        if key is not None and type(key) is not bytes:
            key = _as_bytes(key)
        size = (0 if value is None else len(value)) + (0 if key is None else len(key)) + RECORD_OVERHEAD
        if size > self._max_record:
            raise MessageTooLargeError(
                f"record of {size - RECORD_OVERHEAD} bytes exceeds message.max.bytes={self._max_message}")
        if headers is not None:
            headers = _as_header_list(headers)
        if self._txn is not None and not self._txn.in_transaction:
            self._txn.check_can_produce()
        with self._lock:
            if self._buffered_bytes + size > self._buffer_memory:
                self._check_open()
                raise QueueFullError(f"buffer.memory={self._buffer_memory} is used up; call poll() and retry")
            buf = self._buffers.get(topic)
            if buf is None:
                buf = self._new_buffer(topic)
            if not buf.count:
                self._wake_sender()
            buf.open_rows(0.0 if buf.count else time.monotonic()).append(
                (key, value, timestamp or time.time_ns() // 1_000_000, headers, partition,
                 on_delivery or callback or self._default_cb))
            if key is not None or partition >= 0:
                buf.keyed = True
            buf.bytes += size
            buf.count += 1
            self._buffered_bytes += size
            self._outstanding += 1
            if buf.bytes >= self._batch_size:
                self._wake_sender()

    def _new_buffer(self, topic: str) -> TopicBuffer:
        self._check_open()
        buf = self._buffers[topic] = TopicBuffer()
        return buf

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError("the producer is closed")

    def _wake_sender(self) -> None:
        self._wakeup = True
        self._cond.notify()

    def produce_batch(self, topic: str, table, partition: int = -1, on_delivery=None) -> int:
        """Queue an Arrow table or record batch of records; returns how many were queued.

        Columns: ``value`` (binary or string, required), ``key``, ``timestamp`` (int64 ms or an
        Arrow timestamp; missing means now) and ``headers`` (list<struct<key, value>>). Blocks up
        to ``max.block.ms`` for buffer space. ``on_delivery(err, msg)`` is called once per
        underlying batch, with the batch's first record as ``msg``.
        """
        batch = normalise_table(table, time.time_ns() // 1_000_000)
        step = max(1, self._batch_size // 2)
        sizes = batch.get_total_buffer_size()
        rows_per_piece = max(1, int(batch.num_rows * step / max(1, sizes))) if sizes > step else batch.num_rows
        cb = on_delivery or self._default_cb
        for start in range(0, batch.num_rows, rows_per_piece):
            piece = batch.slice(start, rows_per_piece)
            self._queue_table(topic, piece, partition, cb, piece.get_total_buffer_size())
        return batch.num_rows

    def _queue_table(self, topic, piece, partition, callback, size) -> None:
        deadline = time.monotonic() + self.config["max.block.ms"] / 1000.0
        with self._cond:
            while self._buffered_bytes and self._buffered_bytes + size > self._buffer_memory:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise QueueFullError(f"buffer.memory stayed full for max.block.ms={self.config['max.block.ms']}")
                self._cond.notify()
                self._cond.wait(min(remaining, 0.05))
            if self._closed:
                raise ClientClosedError("the producer is closed")
            buf = self._buffers.get(topic)
            if buf is None:
                buf = self._buffers[topic] = TopicBuffer()
            buf.add_table(piece, partition, callback, size, time.monotonic())
            self._buffered_bytes += size
            self._outstanding += piece.num_rows
            self._cond.notify()

    # ------------------------------------------------------------------------------ reports
    def _report(self, batch: ProducerBatch, error, base_offset: int = -1, log_append_time: int = -1) -> None:
        reports = []
        if batch.callbacks is not None:
            keys = batch.records.column(0).to_pylist()
            values = batch.records.column(1).to_pylist()
            stamps = batch.records.column(2).to_pylist()
            kind = TIMESTAMP_LOG_APPEND_TIME if log_append_time >= 0 else TIMESTAMP_CREATE_TIME
            for i, cb in enumerate(batch.callbacks):
                if cb is not None:
                    offset = base_offset + i if base_offset >= 0 else -1
                    ts = log_append_time if log_append_time >= 0 else stamps[i]
                    reports.append((cb, error, Message(batch.topic, batch.partition, offset, keys[i],
                                                       values[i], None, ts, kind)))
        with self._cond:
            self._buffered_bytes -= batch.size_charged
            self._outstanding -= batch.count - len(reports)
            self._cond.notify_all()
        if reports:
            with self._report_cond:
                self._reports.extend(reports)
                self._report_cond.notify_all()
        if error is not None and self._txn is not None:
            self._txn.failed(error)
        if error is not None and batch.callbacks is None:
            log.warning("failed to deliver %d record(s) to %s[%d]: %s", batch.count, batch.topic,
                        batch.partition, error)

    def _release(self, charged: int) -> None:
        with self._cond:
            self._buffered_bytes -= charged
            self._cond.notify_all()

    def poll(self, timeout: float | None = None) -> int:
        """Serve queued delivery callbacks; wait up to ``timeout`` s for one. Returns how many ran."""
        with self._report_cond:
            if not self._reports and timeout:
                self._report_cond.wait(None if timeout < 0 else timeout)
            reports, self._reports = self._reports, collections.deque()
        for cb, err, msg in reports:
            cb(err, msg)
        if reports:
            with self._cond:
                self._outstanding -= len(reports)
                self._cond.notify_all()
        return len(reports)

    def flush(self, timeout: float | None = None) -> int:
        """Send everything buffered now, wait for it, serving callbacks; returns records still pending."""
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        with self._cond:
            self._flushing += 1
            self._cond.notify_all()
        try:
            while True:
                self.poll(0)
                with self._cond:
                    if self._outstanding <= 0:
                        return 0
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return self._outstanding
                    self._cond.wait(0.05 if remaining is None else min(0.05, remaining))
        finally:
            with self._cond:
                self._flushing -= 1

    def __len__(self) -> int:
        return self._outstanding

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        return self.cluster.snapshot([topic] if topic else None, None if timeout < 0 else timeout)

    def close(self, timeout: float | None = None) -> int:
        """Flush, then stop the sender and close connections; returns records left undelivered."""
        left = self.flush(timeout)
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join(5)
        self.cluster.close()
        return left

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _idempotence(cfg, acks: int) -> bool:
    """Kafka 3's rule: on by default with acks=all; asked for explicitly, it needs acks=all,
    retries and at most 5 requests in flight."""
    wanted = cfg["enable.idempotence"]
    fits = acks == -1 and cfg["retries"] > 0 and cfg["max.in.flight.requests.per.connection"] <= 5
    if wanted and not fits:
        raise InvalidConfigError("enable.idempotence=true needs acks=all, retries > 0 and "
                                 "max.in.flight.requests.per.connection <= 5", config="enable.idempotence")
    return fits if wanted is None else bool(wanted)


class _Sender:
    """The producer's background loop: drain buffers, build batches, send, retry, report."""

    def __init__(self, producer: Producer):
        self.p = producer
        cfg = producer.config
        self.retries = cfg["retries"]
        self.backoff = cfg["retry.backoff.ms"] / 1000.0
        self.delivery_timeout = cfg["delivery.timeout.ms"] / 1000.0
        self.max_request = cfg["max.request.size"]
        self.max_in_flight = cfg["max.in.flight.requests.per.connection"]
        self.propagation = cfg["topic.metadata.propagation.max.ms"] / 1000.0
        self.sticky = StickyPartitioner()
        self.queues: dict[tuple[str, int], collections.deque] = {}
        self.streams: dict[int, _ProduceStream] = {}
        self.in_flight: dict[int, int] = collections.defaultdict(int)
        # Unanswered requests carrying each partition. An unsteady partition (being retried, or until
        # the time noted for it or its node) sends nothing while a request of it is unanswered.
        self.partition_in_flight: dict[tuple[str, int], int] = collections.defaultdict(int)
        # Unanswered batches of each partition: an idempotent producer keeps them within the
        # broker's IDEMPOTENCE_WINDOW so that any of them, resent, is recognised as a duplicate.
        self.unanswered_batches: dict[tuple[str, int], int] = collections.defaultdict(int)
        self.retrying: set[tuple[str, int]] = set()
        self.settle_time = _SETTLE_S
        self.unsteady_until: dict[tuple[str, int], float] = {}
        self.node_unsteady_until: dict[int, float] = {}
        self.sequence = itertools.count(1)
        self.send_at = 0.0  # when _send may next have something to send (answers also wake it)
        self.completions: collections.deque = collections.deque()
        self.unknown_since: dict[str, float] = {}
        self.stale_metadata = False
        # Idempotence: the producer id and epoch, and each partition's next sequence number.
        self.producer_id = -1
        self.producer_epoch = 0
        self.next_sequence: dict[tuple[str, int], int] = {}
        # Without transactional.id: ask the broker for the next epoch before sending more.
        self.epoch_bump_needed = False

    # -------------------------------------------------------------------------------- loop
    def run(self) -> None:
        p = self.p
        while True:
            with p._cond:
                timeout = self._wait_time(time.monotonic())
                if timeout > 0 and not self.completions:
                    p._cond.wait(timeout)
                if p._closed and not p._buffers and not self._busy():
                    for stream in self.streams.values():
                        stream.close()
                    return
                ready = self._take_ready(time.monotonic())
            try:
                self._step(ready)
            except Exception:  # noqa: BLE001 - the sender must survive; batches fail individually
                log.exception("producer sender step failed")
                time.sleep(self.backoff)

    def _busy(self) -> bool:
        return bool(self.completions or any(self.queues.values()) or any(self.in_flight.values()))

    def _wait_time(self, now: float) -> float:
        p = self.p
        waits = [1.0]
        for buf in p._buffers.values():
            if buf.hold_until > now:
                waits.append(buf.hold_until - now)
            elif p._flushing or p._closed or buf.bytes >= p._batch_size * (4 if buf.keyed else 1):
                return 0
            else:
                waits.append(buf.since + p._linger - now)
        waits.append(self.send_at - now)
        return max(0.0, min(waits))

    def _take_ready(self, now: float) -> dict[str, TopicBuffer]:
        p = self.p
        ready = {}
        for topic, buf in list(p._buffers.items()):
            if buf.hold_until > now:
                continue
            if (p._flushing or p._closed or now - buf.since >= p._linger
                    or buf.bytes >= p._batch_size * (4 if buf.keyed else 1)):
                ready[topic] = buf
                del p._buffers[topic]
        return ready

    def _step(self, ready: dict[str, TopicBuffer]) -> None:
        while self.completions:
            self._complete(*self.completions.popleft())
        if self.stale_metadata:
            self.stale_metadata = False
            self._refresh_metadata()
        for topic, buf in ready.items():
            self._enqueue(topic, buf)
        self._expire(time.monotonic())
        self._send(time.monotonic())

    def _refresh_metadata(self) -> None:
        try:
            self.p.cluster.refresh()
        except RiverlogError as e:
            log.debug("metadata refresh failed: %s", e)

    # -------------------------------------------------------------------------------- batching
    def _enqueue(self, topic: str, buf: TopicBuffer) -> None:
        p = self.p
        try:
            info = p.cluster.topic(topic)
            self.unknown_since.pop(topic, None)
        except UnknownTopicOrPartitionError as e:
            self._hold_unknown(topic, buf, e)
            return
        except RiverlogError as e:
            self._hold_unknown(topic, buf, e)
            return
        n = len(info.partitions)
        for chunk in buf.chunks:
            records, explicit, callbacks = chunk.to_arrow()
            charged = _charge(chunk, records)
            parts = assign_partitions(records, explicit, n, topic, self.sticky, p._batch_size)
            bad = parts >= n
            if bad.any():
                self._fail_rows(topic, records, parts, callbacks, bad, n, buf.since)
                keep = ~bad
                records = records.filter(keep)
                callbacks = None if callbacks is None else [c for c, k in zip(callbacks, keep) if k]
                parts = parts[keep]
            batches = build_batches(topic, records, parts, callbacks, buf.since, p._batch_size,
                                    p.config["batch.num.messages"], p.config["compression.type"],
                                    p.config["message.max.bytes"])
            if batches:
                _spread_charge(batches, charged)
            else:
                p._release(charged)
            for batch in batches:
                batch.sequence = next(self.sequence)
                self.queues.setdefault((topic, batch.partition), collections.deque()).append(batch)

    def _hold_unknown(self, topic: str, buf: TopicBuffer, error: RiverlogError) -> None:
        """Keep records for a topic not (yet) in metadata; fail them after the propagation time."""
        now = time.monotonic()
        first = self.unknown_since.setdefault(topic, now)
        if now - first < self.propagation and error.retriable:
            with self.p._cond:
                newer = self.p._buffers.get(topic)
                if newer is not None:
                    buf.absorb(newer)
                buf.hold_until = now + self.backoff
                self.p._buffers[topic] = buf
            return
        self.unknown_since.pop(topic, None)
        for chunk in buf.chunks:
            records, explicit, callbacks = chunk.to_arrow()
            batch = ProducerBatch(topic, -1, b"", records, callbacks, buf.since)
            batch.size_charged = _charge(chunk, records)
            self.p._report(batch, error)

    def _fail_rows(self, topic, records, parts, callbacks, mask, n, since) -> None:
        idx = [i for i, m in enumerate(mask) if m]
        batch = ProducerBatch(topic, int(parts[idx[0]]), b"", records.take(idx),
                              None if callbacks is None else [callbacks[i] for i in idx], since)
        batch.size_charged = 0
        self.p._report(batch, UnknownPartitionError(
            f"topic '{topic}' has {n} partition(s); partition {batch.partition} does not exist"))

    def _expire(self, now: float) -> None:
        for key, pending in self.queues.items():
            while pending and now - pending[0].created >= self.delivery_timeout:
                batch = pending.popleft()
                self._gave_up(batch)
                self.p._report(batch, KafkaTimeoutError(
                    f"{batch.count} record(s) for {batch.topic}[{batch.partition}] expired after "
                    f"delivery.timeout.ms={int(self.delivery_timeout * 1000)}"))

    # -------------------------------------------------------------------------------- sending
    def _muted(self, key, node: int, now: float) -> bool:
        """An unsteady partition sends nothing more until its unanswered request is answered: the
        broker could fail that request and write a later one sent meanwhile. An idempotent
        partition with a full window of unanswered batches waits too."""
        if self.p._idempotent and self.unanswered_batches[key] >= IDEMPOTENCE_WINDOW:
            return True
        return self.partition_in_flight[key] > 0 and (
            key in self.retrying or now < self.unsteady_until.get(key, 0.0)
            or now < self.node_unsteady_until.get(node, 0.0))

    def _node_blocked(self, node: int) -> bool:
        stream = self.streams.get(node)
        # While a broken stream's failed requests are not requeued yet, sending later batches on a
        # new stream first would reorder the partitions they share.
        return (self.in_flight[node] >= self.max_in_flight
                or stream is not None and stream.dead and self.in_flight[node] > 0)

    def _init_producer_id(self) -> bool:
        """An idempotent producer's id, or (it has one) its next epoch: the broker decides."""
        request = pb.InitProducerIdRequest()
        if self.producer_id >= 0:
            request.producer_id, request.producer_epoch = self.producer_id, self.producer_epoch
        try:
            reply = self.p.cluster.call_any("InitProducerId", request, self.p.config["request.timeout.ms"] / 1000.0)
        except RiverlogError as e:
            log.debug("InitProducerId failed: %r", e)
            return False
        self.new_epoch(reply.producer_id, reply.producer_epoch)
        return True

    def new_epoch(self, producer_id: int, producer_epoch: int) -> None:
        """The one place that moves the producer to a new epoch: one the broker handed out in an
        InitProducerId answer. Every partition numbers from 0 again (no partition refuses that).
        Called by the sender, or by the application's thread when nothing of a transaction is
        queued (init_transactions, the bump after an abort)."""
        with self.p._cond:
            self.producer_id, self.producer_epoch = producer_id, producer_epoch
            self.next_sequence = {}
            self.epoch_bump_needed = False

    def _add_to_transaction(self, now: float):
        """Partitions the coordinator knows to be in the transaction (None: not transactional)."""
        txn = self.p._txn
        if txn is None:
            return None
        waiting = [key for key, queue in self.queues.items() if queue]
        try:
            return txn.add_partitions(waiting)
        except RiverlogError as e:
            log.debug("AddPartitionsToTxn failed: %r", e)
            if not e.retriable:
                for key in waiting:
                    for batch in self.queues[key]:
                        self.p._report(batch, e)
                    self.queues[key].clear()
            return set()

    def _stamp(self, key, batch: ProducerBatch) -> None:
        """Give a batch, when first sent, its producer id, epoch and sequence numbers."""
        if batch.base_sequence is None:
            seq = self.next_sequence.get(key, 0)
            batch.data = stamp_producer(batch.data, self.producer_id, self.producer_epoch, seq,
                                        transactional=self.p._txn is not None)
            batch.base_sequence, batch.producer_epoch = seq, self.producer_epoch
            self.next_sequence[key] = seq + batch.count

    def _send(self, now: float) -> None:
        txn = self.p._txn
        doomed = txn.doomed() if txn is not None else None
        if doomed is not None:
            self._fail_queued(doomed)  # fenced, or the transaction can only abort: send nothing more
            return
        if self.p._idempotent and (self.producer_id < 0 or self.epoch_bump_needed) and any(self.queues.values()):
            if txn is not None or not self._init_producer_id():
                self.send_at = now + self.backoff
                return
        added = self._add_to_transaction(now)
        next_at = math.inf
        by_node: dict[int, list] = collections.defaultdict(list)
        for key, pending in self.queues.items():
            if not pending:
                continue
            if pending[0].retry_at > now:
                next_at = min(next_at, pending[0].retry_at)
                continue
            try:
                node = self.p.cluster.leader(*key)
            except RiverlogError:
                self.stale_metadata = True
                next_at = min(next_at, now + self.backoff)
                continue
            if self._muted(key, node, now):
                continue  # its answer wakes the sender
            if added is not None and key not in added:
                next_at = min(next_at, now + self.backoff)
                continue
            by_node[node].append(key)
        for node, keys in by_node.items():
            while keys and not self._node_blocked(node):
                request, batches, keys = self._build_request(keys)
                if not batches:
                    break
                self._dispatch(node, request, batches)
            # A blocked node is woken by an answer or the broken stream's report; otherwise a
            # partition with batches left over (a request holds max.request.size) goes on now.
            if not self._node_blocked(node) and any(
                    self.queues[key] and not self._muted(key, node, now) for key in by_node[node]):
                next_at = now
        self.send_at = next_at

    def _build_request(self, keys):
        request = pb.ProduceRequest(acks=self.p._acks, timeout_ms=self.p.config["request.timeout.ms"])
        batches, size, rest = [], 0, []
        topics: dict[str, pb.ProduceTopic] = {}
        for key in keys:
            queue = self.queues[key]
            taken = []
            window = IDEMPOTENCE_WINDOW - self.unanswered_batches[key] if self.p._idempotent else math.inf
            while queue and len(taken) < window and queue[0].retry_at <= time.monotonic() and (
                    not batches and not taken or size + queue[0].size <= self.max_request):
                # An idempotent resend goes alone: the broker recognises a resent batch only so.
                if self.p._idempotent and taken and (taken[-1].attempts or queue[0].attempts):
                    break
                batch = queue.popleft()
                if self.p._idempotent:
                    self._stamp(key, batch)
                taken.append(batch)
                size += batch.size
            if not taken:
                rest.append(key)
                continue
            topic = topics.get(key[0]) or topics.setdefault(key[0], request.topics.add(name=key[0]))
            topic.partitions.add(partition=key[1], records=b"".join(b.data for b in taken)
                                 if len(taken) > 1 else taken[0].data)
            batches.append((key, taken))
        return request, batches, rest

    def _dispatch(self, node: int, request, batches) -> None:
        self.in_flight[node] += 1
        for key, taken in batches:
            self.partition_in_flight[key] += 1
            self.unanswered_batches[key] += len(taken)
        stream = self.streams.get(node)
        # A broken stream is replaced only once its other requests are reported and requeued (this
        # is the only one unanswered): a later batch must not reach the broker before them. Until
        # then send() on the broken stream fails this request too, and it is requeued in order.
        if stream is None or stream.dead and self.in_flight[node] == 1:
            # A replaced stream may lead to a broker that just restarted. (A first stream needs no
            # settling: it follows metadata, which a broker serves only once it has caught up.)
            if stream is not None:
                self.node_unsteady_until[node] = time.monotonic() + self.settle_time
            try:
                stream = self.streams[node] = _ProduceStream(node, self.p.cluster.stub(node), self._on_stream_event)
            except Exception as e:  # noqa: BLE001 - e.g. an unknown broker: retried like any failure
                self.completions.append((node, [(batches, None)],
                                         e if isinstance(e, RiverlogError) else NetworkError(str(e))))
                return
        stream.send(request, batches)

    def _on_stream_event(self, node: int, results, failure) -> None:
        """From a stream's reader thread: answered requests (in order) or a broken stream."""
        with self.p._cond:
            self.completions.append((node, results, failure))
            self.p._cond.notify_all()

    def _complete(self, node: int, results, failure) -> None:
        """``results``: [(batches, response)] in send order; ``failure`` fails them all."""
        self.in_flight[node] -= len(results)
        for batches, _ in results:
            for key, taken in batches:
                self.partition_in_flight[key] -= 1
                self.unanswered_batches[key] -= len(taken)
        if failure is not None:
            # The requests of one broken stream may come in several events (the reader's, and
            # send()'s when it found the stream dead) in either order: _requeue puts each batch
            # back at its place in its partition's order whatever the order of the events.
            for batches, _ in results:
                for key, taken in batches:
                    self._retry_or_fail(key, taken, failure)
            return
        for batches, response in results:
            answered = {(t.name, r.partition): r for t in response.topics for r in t.partitions}
            for key, taken in batches:
                r = answered.get(key)
                err = None
                if r is None and self.p._acks != 0:
                    err = RiverlogError("the broker's answer did not mention this partition")
                elif r is not None and r.error_code:
                    err = error_for_code(r.error_code)(r.error_message)
                if err is None or self.p._acks == 0:
                    self._deliver(taken, r)
                    self._settle(key)
                else:
                    self._retry_or_fail(key, taken, err)

    def _deliver(self, taken: list[ProducerBatch], r) -> None:
        offset = r.base_offset if r is not None and self.p._acks != 0 else -1
        for batch in taken:
            self.p._report(batch, None, offset, r.log_append_time if r is not None else -1)
            if offset >= 0:
                offset += batch.count

    def _gave_up(self, batch: ProducerBatch) -> None:
        """A batch that was sent will never be written: later sequence numbers of its partition
        would wait forever for it, so the producer needs a new epoch from the broker (at once
        without transactions; after the abort with them) and numbers from 0 again."""
        if self.p._idempotent and batch.base_sequence is not None and batch.producer_epoch == self.producer_epoch:
            if self.p._txn is not None:
                self.p._txn.gave_up_sent_batch()
            else:
                self.epoch_bump_needed = True

    def _fail_queued(self, error: RiverlogError) -> None:
        """Fail every batch not sent yet (those in flight are answered as usual)."""
        for key, queue in self.queues.items():
            while queue:
                batch = queue.popleft()
                self._gave_up(batch)
                self.p._report(batch, error)
            self.retrying.discard(key)

    def _retry_or_fail(self, key, taken: list[ProducerBatch], error: RiverlogError) -> None:
        log.debug("produce to %s[%d] failed: %r", key[0], key[1], error)
        now = time.monotonic()
        retriable = error.retriable
        txn = self.p._txn
        if txn is not None and isinstance(error, (ProducerFencedError, InvalidProducerEpochError)):
            error = txn.fenced(error)  # another instance has this epoch now: fatal, never retried
        if isinstance(error, UnknownProducerIdError) and txn is None:
            # The partition forgot this producer (it was idle past producer.id.expiration.ms): the
            # broker hands out a new epoch, which numbers from 0 again and which any partition
            # accepts (Kafka's KIP-360).
            if any(b.producer_epoch == self.producer_epoch for b in taken):
                self.epoch_bump_needed = True
            retriable = True
        if isinstance(error, (OutOfOrderSequenceError, UnknownProducerIdError)):
            for batch in taken:  # not written; if its epoch is over, it is numbered again when resent
                if batch.producer_epoch != self.producer_epoch or self.epoch_bump_needed:
                    batch.base_sequence = None
        if retriable:
            self.stale_metadata = True
            self.unsteady_until[key] = now + self.settle_time
            retry = [b for b in taken if b.attempts < self.retries and now - b.created < self.delivery_timeout]
            if len(retry) == len(taken):
                for batch in taken:
                    batch.attempts += 1
                    batch.retry_at = now + self.backoff
                self._requeue(key, taken)
                self.retrying.add(key)
                return
        for batch in taken:
            self._gave_up(batch)
            self.p._report(batch, error)
        self._settle(key)

    def _settle(self, key) -> None:
        """End a partition's retrying state once no retried batch of it is left to send."""
        if key in self.retrying:
            queue = self.queues.get(key)
            if not queue or not queue[0].attempts:
                self.retrying.discard(key)

    def _requeue(self, key, batches: list[ProducerBatch]) -> None:
        """Put failed batches back into their partition's queue at their place in produce order.

        The queue is sorted by ``sequence``; batches retried earlier (older) may already be at its
        front and unsent (newer) batches follow, so the failed ones are merged in, not prepended.
        """
        queue = self.queues.setdefault(key, collections.deque())
        last = max(b.sequence for b in batches)
        front = list(batches)
        while queue and queue[0].sequence < last:
            front.append(queue.popleft())
        front.sort(key=lambda b: b.sequence)
        queue.extendleft(reversed(front))


class _ProduceStream:
    """One ordered ProduceStream call to a broker: requests go in a queue, answers come back in order.

    A reader thread matches each answer to the oldest unanswered request. When the stream breaks,
    every unanswered request is reported failed at once (in order) and the stream is replaced.
    """

    def __init__(self, node: int, stub, on_event):
        self.node = node
        self.on_event = on_event
        self.dead = False
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._pending: collections.deque = collections.deque()
        self._lock = threading.Lock()
        self._next_id = 0
        self._call = stub.ProduceStream(iter(self._requests.get, None))
        threading.Thread(target=self._read, name=f"riverlog-produce-{node}", daemon=True).start()

    def send(self, request, batches) -> None:
        with self._lock:
            if self.dead:  # the reader already failed everything pending; fail this one too
                dead = True
            else:
                dead = False
                self._next_id += 1
                request.correlation_id = self._next_id
                self._pending.append((self._next_id, batches))
                self._requests.put(request)
        if dead:
            self.on_event(self.node, [(batches, None)], NetworkError("the produce stream broke"))

    def _read(self) -> None:
        try:
            for response in self._call:
                with self._lock:
                    correlation, batches = self._pending[0] if self._pending else (None, None)
                    if response.correlation_id != correlation:  # it stays pending: failed below
                        raise NetworkError(f"produce stream answered request {response.correlation_id} "
                                           f"while {correlation} was next")
                    self._pending.popleft()
                self.on_event(self.node, [(batches, response)], None)
            error: RiverlogError = NetworkError("the broker closed the produce stream")
        except grpc.RpcError as e:
            error = translate_rpc_error(e, "ProduceStream")
        except RiverlogError as e:
            error = e
        with self._lock:
            self.dead = True
            failed = [(batches, None) for _, batches in self._pending]
            self._pending.clear()
        self._requests.put(None)
        if failed:
            self.on_event(self.node, failed, error)

    def close(self) -> None:
        self._requests.put(None)
        self._call.cancel()


def _charge(chunk, records) -> int:
    """The buffer.memory bytes a chunk was charged when produced."""
    if isinstance(chunk, _TableChunk):
        return records.get_total_buffer_size()
    return int(record_sizes(records).sum())


def _spread_charge(batches: list[ProducerBatch], charged: int) -> None:
    total = sum(b.count for b in batches) or 1
    left = charged
    for i, batch in enumerate(batches):
        share = left if i == len(batches) - 1 else charged * batch.count // total
        batch.size_charged = share
        left -= share



def _as_bytes(data) -> bytes:
    if isinstance(data, str):
        return data.encode()
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"expected bytes or str, got {type(data).__name__}")


def _as_header_list(headers):
    if isinstance(headers, dict):
        return list(headers.items())
    return headers if isinstance(headers, list) else list(headers)
