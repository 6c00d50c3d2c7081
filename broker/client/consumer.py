"""The consumer: confluent-kafka's API over background fetch threads that prefetch Arrow batches.

This class is the application's side only: it takes what is queued and runs the group's callbacks.
The rest is split by concept:

- ``fetch_state.py`` (pure): each assigned partition's fetch offset, position, generation and
  fetch phase, and how responses and errors move them; ``fetch_buffer.py``: the decoded chunks;
- ``fetcher.py``: one fetch thread per broker and a decode thread, around the fetch state;
- ``membership.py``: the heartbeat thread; ``committer.py``: offset commits.

One lock (``_cond``) guards the fetch state; poll waits on it for the fetcher's notifications.
``seek``/``assign``/``pause`` bump a partition's generation so data fetched for an old position is
dropped, never returned. A batch that cannot be decoded halts its partition at its offset
(``fetch_state``). Every public method of a closed consumer raises :class:`ConsumerClosedError`,
a ``RuntimeError("Consumer closed")`` as confluent-kafka's.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

import pyarrow as pa

from broker.client.assignment import COOPERATIVE, check_add, check_method, check_remove, rebalance_protocol
from broker.client.cluster import ClusterClient, ClusterMetadata
from broker.client.committer import OffsetCommitter
from broker.client.client_events import ClientEvents
from broker.client.config import CONSUMER_CONFIG, client_config
from broker.client.coordinator import CoordinatorClient
from broker.client.fetch_buffer import BATCH_SCHEMA
from broker.client.fetch_state import AUTO_OFFSET_RESET, EARLIEST, LATEST, OFFSET_TAIL_BASE, FetchState
from broker.client.fetcher import Fetcher, list_offset
from broker.client.membership import GroupMembership
from broker.client.subscription import Subscription
from broker.client.message import OFFSET_BEGINNING, OFFSET_END, OFFSET_INVALID, Message, TopicPartition
from broker.clock import SYSTEM_CLOCK
from broker.errors import ClientClosedError, InvalidConfigError, KafkaError, KafkaException, RiverlogError

log = logging.getLogger(__name__)

__all__ = ["BATCH_SCHEMA", "Consumer", "ConsumerClosedError", "ConsumerGroupMetadata", "EARLIEST", "LATEST"]

MAX_CONSUME_MESSAGES = 1_000_000  # confluent-kafka's bound on consume(num_messages)


class ConsumerClosedError(ClientClosedError):
    """A method was called on a closed consumer: confluent-kafka's ``RuntimeError("Consumer
    closed")`` (a :class:`ClientClosedError`, so a ``RuntimeError``)."""

@dataclass(frozen=True)
class ConsumerGroupMetadata:
    """Who this consumer is in its group (handed to a transactional producer's offset commit)."""
    group_id: str
    member_id: str
    member_epoch: int
    group_instance_id: str


class Consumer:
    """confluent-kafka's ``Consumer``: ``assign`` or ``subscribe``, then ``poll``/``consume``
    (one ``Message`` at a time) or ``poll_batch`` (an Arrow table), ``commit``, ``close``.

        with Consumer({"bootstrap.servers": "127.0.0.1:9092", "group.id": "billing",
                       "auto.offset.reset": "earliest", "enable.auto.commit": False}) as c:
            c.subscribe(["orders"])
            while (msg := c.poll(1.0)) is not None:
                if msg.error() is None:
                    handle(msg.value())
                    c.commit(msg)

    ``poll()`` usually answers from memory: the fetch threads keep a long-poll in flight per broker
    and prefetch up to ``queued.max.messages.kbytes``.
    """

    def __init__(self, config: dict | None = None, **kwargs):
        cfg = client_config(CONSUMER_CONFIG, config, kwargs)
        self.config = cfg
        self._events = ClientEvents(cfg, "consumer")
        self._auto_store = cfg["enable.auto.offset.store"]
        self.cluster = ClusterClient.from_config(cfg, self._events.error)
        self._clock = SYSTEM_CLOCK
        self._cond = threading.Condition()
        self._fetch_state = FetchState(AUTO_OFFSET_RESET[cfg["auto.offset.reset"]], cfg["enable.partition.eof"],
                                       cfg["retry.backoff.ms"] / 1000.0, cfg["queued.max.messages.kbytes"] * 1024,
                                       self._clock)
        self._closed = False
        self._group_id = cfg["group.id"]
        self._coordinator = CoordinatorClient(self.cluster, self._group_id) if self._group_id else None
        self._membership: GroupMembership | None = None
        self._committer = OffsetCommitter(self._coordinator, cfg, self._group_id, self._member,
                                          self._clock, self._group_wake) if self._coordinator else None
        self._callbacks: dict = {}
        self._subscription: Subscription | None = None  # set for a regex subscription
        self._owned: set[tuple[str, int]] = set()  # what the group gave this member
        self._protocol: str | None = None  # the subscription's rebalance protocol (assignment.py)
        self._assign_calls = 0  # assign-family calls, so a rebalance knows whether its callback made one
        self._fetcher = Fetcher(self.cluster, cfg, self._fetch_state, self._cond, self._committed_of
                                if self._committer is not None else None)

    def _committed_of(self, keys) -> dict:
        """For the fetcher: the group's committed offsets of partitions assigned with none."""
        return self._committer.committed_offsets(keys, self.config["request.timeout.ms"] / 1000.0)

    # --------------------------------------------------------------------------- assignment
    def assign(self, partitions: list[TopicPartition]) -> None:
        """Consume exactly these partitions, from their offsets. One without an offset
        (``OFFSET_INVALID``, ``OFFSET_STORED``) starts at the group's committed offset, or at
        auto.offset.reset when none is committed. Offsets stored with ``store_offsets`` are forgotten.

        A cooperative subscription refuses it (``_STATE``): use ``incremental_assign``."""
        self._check_open()
        self._assign_calls += 1
        check_method(self._protocol, False, "Failed to set assignment")
        check_add((), partitions)
        self._set_assignment(partitions)

    def _set_assignment(self, partitions: list[TopicPartition]) -> None:
        with self._cond:
            self._check_open()
            self._fetch_state.assign(partitions)
        self._fetcher.kick()

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        """Add these partitions to the assignment. One already assigned fails with ``_CONFLICT``
        and a duplicate with ``_INVALID_ARG`` (nothing is added then), as in librdkafka; an eager
        subscription refuses it (``_STATE``)."""
        self._check_open()
        self._assign_calls += 1
        check_method(self._protocol, True)
        with self._cond:
            check_add(self._fetch_state.partitions, partitions)
            self._fetch_state.add(partitions)
        self._fetcher.kick()

    def unassign(self) -> None:
        self._check_open()
        self._assign_calls += 1
        check_method(self._protocol, False, "Failed to remove assignment")
        self._set_assignment([])

    def assignment(self) -> list[TopicPartition]:
        """The partitions poll() reads, in (topic, partition) order as librdkafka keeps them."""
        self._check_open()
        with self._cond:
            return [TopicPartition(t, p) for t, p in sorted(self._fetch_state.partitions)]

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
        subscription = Subscription(list(topics))
        if self._membership is not None:
            self.unsubscribe()
        self._set_assignment([])
        self._callbacks = {"assign": on_assign, "revoke": on_revoke, "lost": on_lost}
        self._protocol = rebalance_protocol(self.config["partition.assignment.strategy"])
        names = subscription.names
        if subscription.patterns:  # "^..." entries: regexes over the cluster's topics, kept up to date
            response = self.cluster.refresher.refresh_now()
            names = subscription.resolve(response) if response is not None else names
            self._subscription = subscription
            self.cluster.refresher.listeners.append(self._on_metadata)
        self._membership = GroupMembership(self._coordinator, self.config, names, self._group_wake)

    def _on_metadata(self, response) -> None:
        """From the metadata refresher's thread: a regex subscription's topics, resolved again;
        the next heartbeat tells the coordinator."""
        membership, subscription = self._membership, self._subscription
        if membership is None or subscription is None:
            return
        names = subscription.resolve(response)
        if names != membership.topics:
            log.info("subscription %s now matches %s", [p.pattern for p in subscription.patterns], names)
            membership.topics = names

    def _drop_subscription(self) -> None:
        if self._subscription is not None:
            self._subscription = None
            if self._on_metadata in self.cluster.refresher.listeners:
                self.cluster.refresher.listeners.remove(self._on_metadata)

    def unsubscribe(self) -> None:
        """Give up every partition (``on_revoke``) and leave the group."""
        self._check_open()
        membership = self._membership
        self._drop_subscription()
        if membership is None:
            return
        self._protocol = None  # leaving: the callbacks may unassign any way, as librdkafka allows when closing
        self._revoke(set(self._owned), lost=False)
        self._membership = None
        membership.close()

    def _group_wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def _group_step(self) -> None:
        """Apply what the coordinator decided, on the application's thread (callbacks run here)."""
        self._events.serve()
        if self._committer is not None:
            self._committer.serve()
        membership = self._membership
        if membership is None:
            return
        exceeded = membership.poll_exceeded()
        if exceeded is not None:
            with self._cond:
                self._fetch_state.events.append(Message(None, -1, OFFSET_INVALID, error=exceeded))
        membership.polled()
        self._maybe_auto_commit()
        assignment, lost, fatal = membership.pending()
        if fatal is not None:
            self._events.error(fatal)
            self._membership = None
            self._revoke(set(self._owned), lost=True)
            raise fatal
        if lost and self._owned:
            try:
                self._revoke(set(self._owned), lost=True)
            finally:
                membership.applied(self._owned)
        revoked = self._owned - assignment
        if revoked:
            try:
                self._revoke(revoked, lost=False)
            finally:
                membership.applied(self._owned)
        added = assignment - self._owned
        if added:
            try:
                committed = self._committer.committed_offsets(added, self.config["request.timeout.ms"] / 1000.0)
            except RiverlogError as e:
                log.debug("could not read committed offsets yet: %r", e)
                return
            tps = [TopicPartition(t, p, committed.get((t, p), OFFSET_INVALID)) for t, p in sorted(added)]
            try:
                self._rebalance_callback(self._callbacks.get("assign"), tps, assigning=True)
            finally:
                self._owned |= added
                membership.applied(self._owned)

    def _rebalance_callback(self, callback, tps: list[TopicPartition], assigning: bool) -> None:
        """Run an on_assign/on_revoke/on_lost callback. As in confluent-kafka, if it made no
        assign-family call itself (or there is none, or it raised), the consumer makes the one the
        protocol calls for: incremental for cooperative, the whole assignment for eager."""
        self._assign_calls = 0
        try:
            if callback:
                callback(self, tps)
        finally:
            if not self._assign_calls:
                self._default_rebalance(tps, assigning)

    def _default_rebalance(self, tps: list[TopicPartition], assigning: bool) -> None:
        with self._cond:
            current = self._fetch_state.partitions
            if self._protocol == COOPERATIVE or self._protocol is None:
                if assigning:
                    self._fetch_state.add([tp for tp in tps if (tp.topic, tp.partition) not in current])
                else:
                    self._fetch_state.remove(tps)
            elif assigning:
                self._fetch_state.assign(tps)
            else:
                self._fetch_state.assign([])
        self._fetcher.kick()

    def _revoke(self, partitions: set, lost: bool) -> None:
        if not partitions:
            return
        tps = [TopicPartition(t, p) for t, p in sorted(partitions)]
        if not lost and self.config["enable.auto.commit"]:
            try:
                # The one commit Kafka sends again with the epoch a heartbeat brought: the member
                # still owns these partitions until the revocation is acknowledged.
                self._committer.commit_sync(self._to_commit(partitions), 5.0, retry_stale_epoch=True)
            except RiverlogError as e:
                log.warning("auto-commit before revocation failed: %r", e)
        callback = (self._callbacks.get("lost") or self._callbacks.get("revoke")) if lost \
            else self._callbacks.get("revoke")
        try:
            self._rebalance_callback(callback, tps, assigning=False)
        finally:
            self._owned -= partitions

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        """Take these partitions out of the assignment; one not assigned fails with
        ``_INVALID_ARG`` (nothing is removed then), as in librdkafka; an eager subscription
        refuses it (``_STATE``)."""
        self._check_open()
        self._assign_calls += 1
        check_method(self._protocol, True)
        with self._cond:
            check_remove(self._fetch_state.partitions, partitions)
            self._fetch_state.remove(partitions)
        self._fetcher.wake()

    def consumer_group_metadata(self) -> ConsumerGroupMetadata:
        self._check_open()
        member_id, epoch = self._member()
        return ConsumerGroupMetadata(self._group_id, member_id, epoch, self.config["group.instance.id"])

    def _member(self) -> tuple[str, int]:
        return self._membership.metadata() if self._membership is not None else ("", -1)

    # --------------------------------------------------------------------------- commits
    def commit(self, message: Message | None = None, offsets: list[TopicPartition] | None = None,
               asynchronous: bool = True):
        """Commit ``message.offset() + 1``, the given ``offsets``, or every assigned partition's
        position. Asynchronous by default, as in confluent-kafka: returns None at once, and
        ``on_commit(err, partitions)`` reports from a later ``poll()``/``consume()``/``close()``;
        ``asynchronous=False`` waits, returns the committed partitions and raises on failure.
        A message with an error (a ``_PARTITION_EOF`` event...) is refused with ``_INVALID_ARG``:
        its offset is not a record's, and committing past it would skip the next record.

        Without arguments only assigned partitions whose offset differs from the committed one are
        sent; when there is none it fails with ``_NO_OFFSET`` (raised, or given to ``on_commit``
        when asynchronous), as librdkafka's ``rd_kafka_cgrp_assigned_offsets_commit``."""
        self._check_open()
        if self._coordinator is None:
            raise InvalidConfigError("commit() needs group.id", config="group.id")
        if message is not None and offsets is not None:
            raise ValueError("message and offsets are mutually exclusive")
        if message is not None:
            _check_no_error(message, "commit")
            tps = [TopicPartition(message.topic(), message.partition(), message.offset() + 1)]
        elif offsets is not None:
            tps = list(offsets)
        else:
            tps = self._committer.uncommitted(self._to_commit())
            if not tps:
                error = KafkaError(KafkaError._NO_OFFSET, "Local: No offset stored")
                if not asynchronous:
                    raise KafkaException(error)
                self._committer.report(error, [])
                return None
        if not asynchronous:
            return self._committer.commit_sync(tps, self.config["request.timeout.ms"] / 1000.0)
        self._committer.commit_async(tps)
        return None

    def _maybe_auto_commit(self) -> None:
        if self._committer.auto_commit_due():
            self._committer.commit_moved(self._to_commit())

    def _to_commit(self, keys=None) -> list[TopicPartition]:
        """What an automatic or argument-less commit stores: the positions poll() reached, or, with
        ``enable.auto.offset.store=false``, the offsets given to ``store_offsets``."""
        with self._cond:
            return self._fetch_state.to_commit(keys, stored=not self._auto_store)

    def store_offsets(self, message: Message | None = None, offsets: list[TopicPartition] | None = None) -> None:
        """Store ``message.offset() + 1`` or the given ``offsets`` for the next automatic or
        argument-less commit; needs ``enable.auto.offset.store=false``. Only assigned partitions
        take one (an assignment starts with none): when no partition given is assigned this fails
        with ``_STATE``, as librdkafka's ``rd_kafka_offsets_store``."""
        self._check_open()
        if self._auto_store:
            raise KafkaException(KafkaError(KafkaError._INVALID_ARG,
                                            "store_offsets() needs enable.auto.offset.store=false"))
        if message is not None and offsets is not None:
            raise ValueError("message and offsets are mutually exclusive")
        if message is None and offsets is None:
            raise ValueError("expected either message or offsets")
        if message is not None:
            _check_no_error(message, "store")
            offsets = [TopicPartition(message.topic(), message.partition(), message.offset() + 1,
                                      leader_epoch=message.leader_epoch())]
        with self._cond:
            stored = [self._fetch_state.store(TopicPartition(tp.topic, tp.partition, tp.offset, tp.metadata,
                                                             tp.leader_epoch)) for tp in offsets]
        if offsets and not any(stored):
            tp = offsets[-1]
            raise KafkaException(KafkaError(KafkaError._STATE,
                                            f"{tp.topic} [{tp.partition}] is not assigned: cannot store its offset"))

    def memberid(self) -> str | None:
        """This member's id in its group, or None before it joined."""
        self._check_open()
        member_id, _ = self._member()
        return member_id or None

    def committed(self, partitions: list[TopicPartition], timeout: float | None = None) -> list[TopicPartition]:
        """The group's committed offset of each partition (``OFFSET_INVALID`` where there is none)."""
        self._check_open()
        if self._coordinator is None:
            raise InvalidConfigError("committed() needs group.id", config="group.id")
        found = self._committer.committed_offsets(
            {(tp.topic, tp.partition) for tp in partitions},
            self.config["request.timeout.ms"] / 1000.0 if timeout is None else timeout, with_metadata=True)
        out = []
        for tp in partitions:
            offset, metadata = found.get((tp.topic, tp.partition), (OFFSET_INVALID, None))
            out.append(TopicPartition(tp.topic, tp.partition, offset, metadata or None))
        return out

    # --------------------------------------------------------------------------- positions
    def seek(self, partition: TopicPartition) -> None:
        """Move an assigned partition's position; data already fetched for it is discarded, and a
        partition stopped by an error event (``auto.offset.reset=error``) fetches again.

        As librdkafka's ``rd_kafka_seek_partitions``: ``OFFSET_STORED`` and negative offsets that
        mean nothing fail with ``_INVALID_ARG``; a partition not assigned with ``_STATE``, one the
        cluster does not have with ``_UNKNOWN_PARTITION``."""
        self._check_open()
        key = (partition.topic, partition.partition)
        offset = partition.offset
        if offset < 0 and offset not in (OFFSET_BEGINNING, OFFSET_END, OFFSET_INVALID) and offset > OFFSET_TAIL_BASE:
            raise KafkaException(KafkaError(KafkaError._INVALID_ARG,
                                            f"{key[0]} [{key[1]}] cannot seek to offset {offset}"))
        with self._cond:
            if key in self._fetch_state.partitions:
                self._fetch_state.seek(key, offset)
                assigned = True
            else:
                assigned = False
        if not assigned:
            topic = self.cluster.topics.get(key[0])
            if topic is None or key[1] not in topic.partitions:
                raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION,
                                                f"{key[0]} [{key[1]}] is not a known partition"))
            raise KafkaException(KafkaError(KafkaError._STATE, f"{key[0]} [{key[1]}] is not assigned"))
        self._fetcher.wake()

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """The offset of the next record poll() returns for each partition; ``OFFSET_INVALID``
        until it has one (before the first fetch of a partition assigned at a logical offset)."""
        self._check_open()
        with self._cond:
            return [TopicPartition(tp.topic, tp.partition, self._fetch_state.position((tp.topic, tp.partition)))
                    for tp in partitions]

    def pause(self, partitions: list[TopicPartition]) -> None:
        """Stop fetching these partitions. Nothing prefetched for them is returned; ``resume``
        goes on from the last record poll() returned + 1."""
        self._check_open()
        with self._cond:
            self._fetch_state.set_paused([(tp.topic, tp.partition) for tp in partitions], True)

    def resume(self, partitions: list[TopicPartition]) -> None:
        self._check_open()
        with self._cond:
            self._fetch_state.set_paused([(tp.topic, tp.partition) for tp in partitions], False)
        self._fetcher.wake()

    # --------------------------------------------------------------------------- reading
    def poll(self, timeout: float | None = None) -> Message | None:
        """The next record (or error event), waiting up to ``timeout`` seconds."""
        self._check_open()
        deadline = self._deadline(timeout)
        state = self._fetch_state
        while True:
            self._group_step()
            with self._cond:
                self._check_open()
                if state.events:
                    return state.events.popleft()
                chunk = state.head()
                if state.room:
                    self._wake_fetcher()
                if chunk is not None:
                    return state.take_one(chunk)
                if not self._wait(deadline):
                    return None

    def consume(self, num_messages: int = 1, timeout: float | None = -1) -> list[Message]:
        """Up to ``num_messages`` records, waiting up to ``timeout`` s for the first."""
        self._check_open()
        if not 0 <= num_messages <= MAX_CONSUME_MESSAGES:
            raise ValueError("num_messages must be between 0 and 1000000 (1M)")
        deadline = self._deadline(timeout)
        state = self._fetch_state
        out: list[Message] = []
        while True:
            self._group_step()
            with self._cond:
                while len(out) < num_messages:
                    self._check_open()
                    if state.events:
                        out.append(state.events.popleft())
                        continue
                    chunk = self._head()
                    if chunk is None:
                        break
                    out.append(state.take_one(chunk))
                if out or not self._wait(deadline):
                    return out

    def poll_batch(self, timeout: float | None = None, max_records: int | None = None) -> pa.Table | None:
        """Every prefetched record (up to ``max_records``) as one Arrow table (``BATCH_SCHEMA``).

        Returns None when nothing arrived in time. Error events are raised, not returned: a
        partition halted at a batch it cannot decode gives the records before it first, then
        raises at the next call.
        """
        self._check_open()
        deadline = self._deadline(timeout)
        state = self._fetch_state
        parts = []
        taken = 0
        while not parts:
            self._group_step()
            with self._cond:
                while True:
                    self._check_open()
                    if state.events:
                        if parts:
                            break
                        raise state.events.popleft().error().exception()
                    chunk = self._head()
                    if chunk is None:
                        break
                    if chunk.error is not None:
                        if parts:
                            break
                        raise state.take_one(chunk).error().exception()
                    n = chunk.remaining if max_records is None else min(chunk.remaining, max_records - taken)
                    parts.append(state.take_slice(chunk, n))
                    taken += n
                    if max_records is not None and taken >= max_records:
                        break
                if not parts and not self._wait(deadline):
                    return None
        return pa.Table.from_batches(parts, schema=BATCH_SCHEMA)

    def _head(self):
        chunk = self._fetch_state.head()
        if self._fetch_state.room:
            self._wake_fetcher()
        return chunk

    def _wake_fetcher(self) -> None:
        self._fetch_state.room = False
        self._fetcher.wake()  # room in the queue

    def _deadline(self, timeout: float | None) -> float | None:
        if timeout is None or timeout < 0:
            return None
        return self._clock.monotonic() + timeout

    def _wait(self, deadline: float | None) -> bool:
        remaining = None if deadline is None else deadline - self._clock.monotonic()
        if remaining is not None and remaining <= 0:
            return False
        self._cond.wait(remaining)
        return True

    def _check_open(self) -> None:
        if self._closed:
            raise ConsumerClosedError("Consumer closed")

    # --------------------------------------------------------------------------- offsets
    def get_watermark_offsets(self, partition: TopicPartition, timeout: float | None = None,
                              cached: bool = False) -> tuple[int, int]:
        """(low, high): the log start offset and the high watermark. ``cached``: as the last fetch
        saw them, without a request (``OFFSET_INVALID`` before one; a partition the consumer does
        not know fails with ``_UNKNOWN_PARTITION``, as librdkafka's ``rd_kafka_get_watermark_offsets``)."""
        self._check_open()
        if cached:
            key = (partition.topic, partition.partition)
            with self._cond:
                marks = self._fetch_state.watermarks(key)
            if marks is not None:
                return marks
            topic = self.cluster.topics.get(key[0])
            if topic is None or key[1] not in topic.partitions:
                raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION,
                                                f"{key[0]} [{key[1]}] is not a known partition"))
            return OFFSET_INVALID, OFFSET_INVALID
        return tuple(list_offset(self.cluster, self.config, partition.topic, partition.partition, at, timeout)[0]
                     for at in (EARLIEST, LATEST))

    def offsets_for_times(self, partitions: list[TopicPartition], timeout: float | None = None):
        """For each partition (offset = a timestamp in ms): the first offset at or after it, or -1."""
        self._check_open()
        out = []
        for tp in partitions:
            offset, _ = list_offset(self.cluster, self.config, tp.topic, tp.partition, tp.offset, timeout)
            out.append(TopicPartition(tp.topic, tp.partition, offset))
        return out

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        self._check_open()
        return self.cluster.snapshot([topic] if topic else None, None if timeout < 0 else timeout)

    # --------------------------------------------------------------------------- lifecycle
    def close(self) -> None:
        """Leave the group (committing positions first when ``enable.auto.commit``), then stop;
        ``on_commit`` runs for the asynchronous commits that were still outstanding."""
        if not self._closed and self._membership is not None:
            try:
                self.unsubscribe()
            except RiverlogError as e:
                log.warning("leaving the group on close failed: %r", e)
        if self._committer is not None:
            self._committer.close()
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        self._fetcher.stop()
        self.cluster.close()
        self._fetcher.join(5)
        self._events.close()
        if self._committer is not None:
            self._committer.serve()  # on_commit for the commits close() waited for

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _check_no_error(message: Message, action: str) -> None:
    """confluent-kafka's refusal to commit or store the offset of an error event."""
    error = message.error()
    if error is not None:
        raise KafkaException(KafkaError(KafkaError._INVALID_ARG,
                                        f"Cannot {action} offsets for message with error: '{error.str()}'"))
