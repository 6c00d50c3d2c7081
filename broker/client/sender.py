"""The producer's sender thread: a thin shell around :class:`~broker.client.send_policy.SendPolicy`.

It owns the thread, the ProduceStreams (one per broker) and every call that does I/O: metadata
look-ups and refreshes, InitProducerId for an idempotent producer, AddPartitionsToTxn through the
transaction's requests. Each step it drains due buffers from the
:class:`~broker.client.accumulator.RecordAccumulator` into partition batches, asks the policy which
may go, sends them, and hands answers and broken streams back to the policy, reporting what it
gives up or delivers through ``report``. What to send and what a failure means is the policy's;
nothing here reads the Producer's fields: the Producer passes in what the sender needs.

Threading: :meth:`Sender.run` is the only thread that touches the policy. Stream reader threads
only append to ``completions`` under the accumulator's condition, which wakes the sender.
"""
from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable

from broker.client.accumulator import RecordAccumulator, TopicBuffer, _ListChunk, _TableChunk
from broker.client.config import sticky_linger_s
from broker.client.producer_batch import ProducerBatch, StickyPartitioner, assign_partitions, build_batches, record_sizes
from broker.client.produce_stream import ProduceStream
from broker.client.send_policy import SendLimits, SendPolicy
from broker.client.transactions import TransactionManager
from broker.clock import SYSTEM_CLOCK, Clock
from broker.errors import (BadMessageError, InFlightPurgedError, InvalidTopicError, KafkaTimeoutError, NetworkError,
                           QueuePurgedError, RiverlogError, UnknownPartitionError, error_for_code)
from broker.proto import riverlog_pb2 as pb
from broker.records.batch import stamp_producer

# Everything the producer logs goes under one name, whichever module does the work.
log = logging.getLogger("broker.client.producer")


class Sender:
    """``report(batch, error, base_offset=-1, log_append_time=-1)`` serves a batch's delivery
    reports; ``transaction`` (transactional producers) registers partitions with the coordinator."""

    def __init__(self, config, limits: SendLimits, acks: int, cluster, accumulator: RecordAccumulator,
                 report: Callable, manager: TransactionManager | None = None, transaction=None,
                 clock: Clock = SYSTEM_CLOCK, stream_factory=ProduceStream):
        self.config = config
        self.acks = acks
        self.cluster = cluster
        self.accumulator = accumulator
        self.report = lambda batch, *args: None if batch.purged else report(batch, *args)
        self.purges: collections.deque = collections.deque()  # (in_queue, in_flight, done event) from purge()
        self.manager = manager
        self.transaction = transaction
        self.clock = clock
        self.stream_factory = stream_factory
        transactional = transaction is not None
        self.policy = SendPolicy(limits, clock, manager, lambda data, pid, epoch, seq: stamp_producer(
            data, pid, epoch, seq, transactional=transactional))
        self.propagation = config["topic.metadata.propagation.max.ms"] / 1000.0
        self.sticky = StickyPartitioner(linger=sticky_linger_s(config))
        self.streams: dict[int, ProduceStream] = {}
        self.send_at = 0.0  # when _send may next have something to send (answers also wake it)
        self.completions: collections.deque = collections.deque()
        self.unknown_since: dict[str, float] = {}
        self.stale_metadata = False

    # -------------------------------------------------------------------------------- loop
    def run(self) -> None:
        acc = self.accumulator
        while True:
            with acc.cond:
                timeout = self.wait_time(self.clock.monotonic())
                if timeout > 0 and not self.completions and not self.purges:
                    acc.cond.wait(timeout)
                if acc.closed and not acc.buffers and not self._busy():
                    for stream in self.streams.values():
                        stream.close()
                    return
                ready = acc.take_ready(self.clock.monotonic())
            try:
                self._step(ready)
            except Exception:  # noqa: BLE001 - the sender must survive; batches fail individually
                log.exception("producer sender step failed")
                time.sleep(self.policy.limits.backoff)

    def _busy(self) -> bool:
        return bool(self.completions) or self.policy.busy()

    def wait_time(self, now: float) -> float:
        """Until a buffer is due or the policy may send again; caller holds the accumulator's condition."""
        return max(0.0, min(self.accumulator.wait_time(now), self.send_at - now))

    def _step(self, ready: dict[str, TopicBuffer]) -> None:
        while self.completions:
            self._complete(*self.completions.popleft())
        if self.stale_metadata:
            self.stale_metadata = False
            try:
                self.cluster.refresh()
            except RiverlogError as e:
                log.debug("metadata refresh failed: %s", e)
        for topic, buf in ready.items():
            self._enqueue(topic, buf)
        while self.purges:
            self._purge(*self.purges.popleft())
        for batch, error in self.policy.expire(self.clock.monotonic()):
            self.report(batch, error)
        self._send(self.clock.monotonic())

    # -------------------------------------------------------------------------------- batching
    def _enqueue(self, topic: str, buf: TopicBuffer) -> None:
        # A look-up with no broker answering blocks this thread: no longer than the records may wait.
        left = self.policy.limits.delivery_timeout - (self.clock.monotonic() - buf.since)
        try:
            info = self.cluster.topic(topic, timeout=min(max(left, 0.05), self.cluster.timeout))
            self.unknown_since.pop(topic, None)
        except RiverlogError as e:
            self._hold_unknown(topic, buf, e)
            return
        except Exception as e:  # noqa: BLE001 - a name the request cannot carry: fail its records, not the step
            self._hold_unknown(topic, buf, InvalidTopicError(f"topic {topic!r} cannot be looked up ({e}); "
                                                             "topic names are str"))
            return
        n, cfg, batch_size = len(info.partitions), self.config, self.accumulator.batch_size
        available = [p for p, part in info.partitions.items() if part.leader >= 0]  # the sticky partitioner's
        for chunk in buf.chunks:
            encoded = self._encode(topic, chunk, buf.since)
            if encoded is None:
                continue
            chunk, (records, explicit, callbacks) = encoded
            sizes = record_sizes(records)
            charged = _charge(chunk, records, sizes)
            parts = assign_partitions(records, explicit, n, topic, self.sticky, batch_size, cfg["partitioner"], sizes,
                                      available, self.clock.monotonic())
            bad = (parts >= n) | (parts < 0)   # an explicit partition out of range, or negative but not -1
            if bad.any():
                self._fail_rows(topic, records, parts, callbacks, bad, n, buf.since)
                keep = ~bad
                records = records.filter(keep)
                callbacks = None if callbacks is None else [c for c, k in zip(callbacks, keep) if k]
                parts, sizes = parts[keep], sizes[keep]
            batches = build_batches(topic, records, parts, callbacks, buf.since, batch_size,
                                    cfg["batch.num.messages"], cfg["compression.type"], cfg["message.max.bytes"],
                                    sizes)
            if batches:
                _spread_charge(batches, charged)
            else:
                self.accumulator.release(charged)
            for batch in batches:
                self.policy.enqueue(batch)

    def _hold_unknown(self, topic: str, buf: TopicBuffer, error: RiverlogError) -> None:
        """Keep records for a topic not (yet) in metadata. A topic the brokers say does not exist
        fails them after topic.metadata.propagation.max.ms; no broker answering fails them at
        delivery.timeout.ms with _MSG_TIMED_OUT, as librdkafka's message.timeout.ms does."""
        now = self.clock.monotonic()
        timeout = self.policy.limits.delivery_timeout
        unanswered = isinstance(error, (NetworkError, KafkaTimeoutError))
        if now - buf.since >= timeout:
            error = KafkaTimeoutError(f"Local: Message timed out: record(s) for topic '{topic}' expired after "
                                      f"delivery.timeout.ms={int(timeout * 1000)} waiting for its metadata: "
                                      f"{error.message}")
        elif unanswered:
            self.accumulator.hold(topic, buf, now + self.policy.limits.backoff)
            return
        else:
            first = self.unknown_since.setdefault(topic, now)
            if now - first < self.propagation and error.retriable:
                self.accumulator.hold(topic, buf, now + self.policy.limits.backoff)
                return
        self.unknown_since.pop(topic, None)
        for chunk in buf.chunks:
            encoded = self._encode(topic, chunk, buf.since)
            if encoded is not None:
                chunk, (records, _, callbacks) = encoded
                batch = ProducerBatch(topic, -1, b"", records, callbacks, buf.since)
                batch.size_charged = _charge(chunk, records)
                self.report(batch, error)

    def _encode(self, topic: str, chunk, since: float):
        """``(chunk, chunk.to_arrow())``; records Arrow cannot hold are reported failed
        (``BadMessageError``) and left out, so the others still go. None if none is left."""
        try:
            return chunk, chunk.to_arrow()
        except Exception as e:  # noqa: BLE001 - a field produce() let through that Arrow refuses
            if not isinstance(chunk, _ListChunk):
                raise
            log.warning("records for %s could not be encoded (%s): failing those, sending the rest", topic, e)
        good, bad = chunk.split_unencodable()
        for records, callback, error in bad:
            batch = ProducerBatch(topic, -1, b"", records, None if callback is None else [callback], since)
            batch.size_charged = _charge(chunk, records)
            self.report(batch, BadMessageError(
                f"record for topic '{topic}' could not be encoded ({type(error).__name__}: {error}); produce() "
                "takes bytes or str keys and values, an int timestamp and headers as a dict or a list of "
                "(str, bytes) tuples"))
        return (good, good.to_arrow()) if good.count else None

    def _fail_rows(self, topic, records, parts, callbacks, mask, n, since) -> None:
        """_UNKNOWN_PARTITION for the ``mask``ed records, one report batch per partition they named."""
        for partition in sorted(set(parts[mask].tolist())):
            idx = [i for i, (m, p) in enumerate(zip(mask.tolist(), parts.tolist())) if m and p == partition]
            batch = ProducerBatch(topic, partition, b"", records.take(idx),
                                  None if callbacks is None else [callbacks[i] for i in idx], since)
            batch.size_charged = 0
            self.report(batch, UnknownPartitionError(
                f"topic '{topic}' has {n} partition(s); partition {partition} does not exist"))

    def _purge(self, in_queue: bool, in_flight: bool, done) -> None:
        """``Producer.purge``: records not sent yet report _PURGE_QUEUE (unpartitioned ones with
        partition -1), records awaiting an answer _PURGE_INFLIGHT; a purged batch in flight is never
        retried and its answer is ignored."""
        try:
            if in_queue:
                with self.accumulator.cond:
                    buffers, self.accumulator.buffers = self.accumulator.buffers, {}
                for topic, buf in buffers.items():
                    for chunk in buf.chunks:
                        encoded = self._encode(topic, chunk, buf.since)
                        if encoded is None:
                            continue
                        chunk, (records, _, callbacks) = encoded
                        batch = ProducerBatch(topic, -1, b"", records, callbacks, buf.since)
                        batch.size_charged = _charge(chunk, records)
                        self.report(batch, QueuePurgedError("purged from the queue before it was sent"))
                for batch in self.policy.drop_queued():
                    self.report(batch, QueuePurgedError("purged from the queue before it was sent"))
            if in_flight:
                for stream in self.streams.values():
                    for batch in stream.in_flight():
                        self.report(batch, InFlightPurgedError(
                            "purged while in flight: the broker may or may not have written it"))
                        batch.purged = True
        finally:
            done.set()

    # -------------------------------------------------------------------------------- sending
    def _send(self, now: float) -> None:
        policy, manager = self.policy, self.manager
        doomed = manager.doomed() if manager is not None else None
        if doomed is not None:
            for batch in policy.drop_queued():  # fenced, or the transaction can only abort
                self.report(batch, doomed)
            return
        if manager is not None and manager.needs_producer_id() and policy.queued():
            # The policy says when: a partition waiting for the new epoch has nothing unanswered.
            if self.transaction is not None or not policy.epoch_bump_due() or not self._init_producer_id():
                self.send_at = now + policy.limits.backoff
                return
        registered = self._add_to_transaction()
        plan = policy.plan(now, lambda key: self.cluster.leader(*key), registered)
        self.stale_metadata |= plan.stale_metadata
        next_at = plan.next_at
        for node, keys in plan.by_node.items():
            while keys and not policy.node_blocked(node, self._broken(node)):
                batches, keys = policy.take(keys, now)
                if not batches:
                    break
                self._dispatch(node, self._request(batches), batches)
            # A blocked node is woken by an answer or the broken stream's report.
            if policy.more_to_send(node, plan.by_node[node], now, self._broken(node)):
                next_at = now
        self.send_at = next_at

    def _broken(self, node: int) -> bool:
        stream = self.streams.get(node)
        return stream is not None and stream.dead

    def _request(self, batches) -> pb.ProduceRequest:
        request = pb.ProduceRequest(acks=self.acks, timeout_ms=self.config["request.timeout.ms"])
        topics: dict[str, pb.ProduceTopic] = {}
        for key, taken in batches:
            topic = topics.get(key[0]) or topics.setdefault(key[0], request.topics.add(name=key[0]))
            topic.partitions.add(partition=key[1], records=b"".join(b.data for b in taken)
                                 if len(taken) > 1 else taken[0].data)
        return request

    def _dispatch(self, node: int, request, batches) -> None:
        self.policy.dispatched(node, batches)
        stream = self.streams.get(node)
        # A broken stream is replaced only once its other requests are reported and requeued (this
        # is the only one unanswered): a later batch must not reach the broker before them. Until
        # then send() on the broken stream fails this request too, and it is requeued in order.
        if stream is None or stream.dead and self.policy.node_in_flight[node] == 1:
            if stream is not None:
                self.policy.stream_replaced(node, self.clock.monotonic())
            try:
                stream = self.streams[node] = self.stream_factory(node, self.cluster.stub(node), self._on_stream_event)
            except Exception as e:  # noqa: BLE001 - e.g. an unknown broker: retried like any failure
                self.completions.append((node, [(batches, None)],
                                         e if isinstance(e, RiverlogError) else NetworkError(str(e))))
                return
        stream.send(request, batches)

    def _on_stream_event(self, node: int, results, failure) -> None:
        """From a stream's reader thread: answered requests (in order) or a broken stream."""
        with self.accumulator.cond:
            self.completions.append((node, results, failure))
            self.accumulator.cond.notify_all()

    def _complete(self, node: int, results, failure) -> None:
        """``results``: [(batches, response)] in send order; ``failure`` fails them all."""
        self.policy.answered(node, [batches for batches, _ in results])
        if failure is not None:
            # The requests of one broken stream may come in several events (the reader's, and
            # send()'s when it found the stream dead) in either order: the policy puts each batch
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
                if r is None and self.acks != 0:
                    err = RiverlogError("the broker's answer did not mention this partition")
                elif r is not None and r.error_code:
                    err = error_for_code(r.error_code)(r.error_message)
                if err is None or self.acks == 0:
                    self._deliver(taken, r)
                    self.policy.delivered(key)
                else:
                    self._retry_or_fail(key, taken, err)

    def _deliver(self, taken: list[ProducerBatch], r) -> None:
        offset = r.base_offset if r is not None and self.acks != 0 else -1
        for batch in taken:
            self.report(batch, None, offset, r.log_append_time if r is not None else -1)
            if offset >= 0:
                offset += batch.count

    def _retry_or_fail(self, key, taken: list[ProducerBatch], error: RiverlogError) -> None:
        log.debug("produce to %s[%d] failed: %r", key[0], key[1], error)
        given_up, error = self.policy.failed(key, taken, error, self.clock.monotonic())
        self.policy.drop_purged(key)
        if error.retriable or not given_up:
            self.stale_metadata = True
        for batch in given_up:
            self.report(batch, error)

    # -------------------------------------------------------------------------------- requests
    def _init_producer_id(self) -> bool:
        """An idempotent producer's id, or (it has one) its next epoch: the broker decides."""
        request = pb.InitProducerIdRequest()
        if self.manager.producer_id >= 0:
            request.producer_id, request.producer_epoch = self.manager.producer_id, self.manager.producer_epoch
        try:
            reply = self.cluster.call_any("InitProducerId", request, self.config["request.timeout.ms"] / 1000.0)
        except RiverlogError as e:
            log.debug("InitProducerId failed: %r", e)
            return False
        self.manager.new_epoch(reply.producer_id, reply.producer_epoch)
        return True

    def _add_to_transaction(self) -> set | None:
        """Partitions the coordinator knows to be in the transaction (None: not transactional)."""
        if self.transaction is None:
            return None
        waiting = self.policy.waiting()
        try:
            return self.transaction.add_partitions(waiting)
        except RiverlogError as e:
            log.debug("AddPartitionsToTxn failed: %r", e)
            if not e.retriable:
                for batch in self.policy.drop_queued(waiting):
                    self.report(batch, e)
            return set()


def _charge(chunk, records, sizes=None) -> int:
    """The buffer.memory bytes a chunk was charged when produced."""
    if isinstance(chunk, _TableChunk):
        return records.get_total_buffer_size()
    return int((record_sizes(records) if sizes is None else sizes).sum())


def _spread_charge(batches: list[ProducerBatch], charged: int) -> None:
    total = sum(b.count for b in batches) or 1
    left = charged
    for i, batch in enumerate(batches):
        share = left if i == len(batches) - 1 else charged * batch.count // total
        batch.size_charged = share
        left -= share
