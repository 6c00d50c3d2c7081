"""The consumer's assignment: ``assign``/``subscribe``, the group's rebalance callbacks, and each
assigned partition's position (``seek``, ``position``, ``pause``, ``resume``), mixed into
:class:`~broker.client.consumer.Consumer`.

What confluent-kafka's consumer does between the group's coordinator and its fetch state: a
rebalance the heartbeat thread learned of is applied on the application's thread (in ``poll()``),
running ``on_assign``/``on_revoke``/``on_lost`` there, and the default assignment is made when a
callback made none. ``seek``/``assign``/``pause`` change the fetch state under the consumer's lock
(``_cond``) and wake the fetcher.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from broker.client.assignment import COOPERATIVE, EAGER, check_add, check_method, check_remove, rebalance_protocol
from broker.client.membership import GroupMembership
from broker.client.message import OFFSET_BEGINNING, OFFSET_END, OFFSET_INVALID, Message, TopicPartition
from broker.client.start_offsets import OFFSET_TAIL_BASE
from broker.client.subscription import Subscription, checked_subscription
from broker.errors import FencedInstanceIdError, InvalidConfigError, KafkaError, KafkaException, RiverlogError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConsumerGroupMetadata:
    """Who this consumer is in its group (handed to a transactional producer's offset commit)."""
    group_id: str
    member_id: str
    member_epoch: int
    group_instance_id: str


class ConsumerAssignment:
    """Needs the fetch state and its lock, the fetcher, the coordinator and committer, ``_check_open``
    and ``_to_commit`` (from Consumer)."""

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
        self._commit_leaving()
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
        elsewhere than the committed offset; an empty list when a rebalance leaves the member
        nothing, as librdkafka calls it), and ``on_lost(consumer, partitions)`` when they were
        taken away without a revocation (session expired, fenced); without ``on_lost``,
        ``on_revoke`` is called. With an eager assignor (range, roundrobin) every rebalance revokes
        everything; with ``cooperative-sticky`` only what moves.
        """
        self._check_open()
        for name, callback in (("on_assign", on_assign), ("on_revoke", on_revoke), ("on_lost", on_lost)):
            if callback is not None and not callable(callback):
                raise TypeError(f"{name} expects a callable")   # confluent-kafka's, before anything changes
        if self._coordinator is None:
            raise InvalidConfigError("subscribe() needs group.id", config="group.id")
        self._check_not_fatal()
        if isinstance(topics, str):
            topics = [topics]
        subscription = checked_subscription(list(topics))
        if self._membership is not None and self._membership.fatal is not None:
            self.unsubscribe()  # that membership is over: a new one joins
        with self._subscribing:
            self._subscribe(subscription, on_assign, on_revoke, on_lost)

    def _subscribe(self, subscription: Subscription, on_assign, on_revoke, on_lost) -> None:
        membership = self._membership
        self._drop_subscription()
        if membership is None:
            self._set_assignment([])
        self._callbacks = {"assign": on_assign, "revoke": on_revoke, "lost": on_lost}
        self._protocol = rebalance_protocol(self.config["partition.assignment.strategy"])
        names = subscription.names
        if subscription.patterns:  # "^..." entries: regexes over the cluster's topics, kept up to date
            response = self.cluster.refresher.refresh_now()
            names = subscription.resolve(response) if response is not None else names
            self._subscription = subscription
            self.cluster.refresher.listeners.append(self._on_metadata)
        if membership is not None:
            # Already in the group: the next heartbeat carries the new subscription, as librdkafka's
            # rd_kafka_cgrp_consumer_subscribe; the coordinator takes back only what it no longer covers.
            membership.subscribe(names)
            return
        self._membership = GroupMembership(self._coordinator, self.config, names, self._group_wake)

    @property
    def _subscribing(self):
        """Held while ``subscribe()`` changes the subscription, so a refresh that resolved the old
        one (on the refresher's thread) cannot hand its topics to the membership afterwards."""
        return self.__dict__.get("_subscribe_lock") or self.__dict__.setdefault("_subscribe_lock", threading.RLock())

    def _on_metadata(self, response) -> None:
        """From the metadata refresher's thread: a regex subscription's topics, resolved again;
        the next heartbeat tells the coordinator."""
        membership, subscription = self._membership, self._subscription
        if membership is None or subscription is None:
            return
        names = subscription.resolve(response)
        with self._subscribing:
            if self._subscription is not subscription or self._membership is not membership:
                return  # subscribe() or unsubscribe() came in between: that one stands
            if names != membership.topics:
                log.info("subscription %s now matches %s", [p.pattern for p in subscription.patterns], names)
                membership.subscribe(names)

    def _drop_subscription(self) -> None:
        if self._subscription is not None:
            self._subscription = None
            if self._on_metadata in self.cluster.refresher.listeners:
                self.cluster.refresher.listeners.remove(self._on_metadata)

    def unsubscribe(self) -> None:
        """Give up every partition (``on_revoke``) and leave the group. Partitions the member lost
        (fenced, session expired, ``max.poll.interval.ms`` exceeded) and no ``poll()`` handled yet
        go with ``on_lost`` and are not committed, as Kafka's
        ``invokeOnPartitionsRevokedOrLostToReleaseAssignment``: their new owner may be further on."""
        self._check_open()
        membership = self._membership
        self._drop_subscription()
        if membership is None:
            return
        self._protocol = None  # leaving: the callbacks may unassign any way, as librdkafka allows when closing
        _, lost, _ = membership.pending()
        self._revoke(set(self._owned), lost=lost)
        self._membership = None
        membership.close()

    def _commit_leaving(self, keys=None) -> None:
        """With ``enable.auto.commit``, an ``assign()`` consumer commits the positions of partitions
        leaving its assignment (assign, unassign, close), in the background, as librdkafka's
        ``rd_kafka_assignment_serve_removals``; a group member's are committed before revocation."""
        if self._membership is None and self._committer is not None and self.config["enable.auto.commit"] \
                and self._fatal_error is None and self._fetch_state.partitions:
            self._committer.commit_moved(self._to_commit(keys))

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
        assignment, lost, fatal = membership.pending()
        if isinstance(fatal, FencedInstanceIdError):
            self._fenced()
            return
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
        # Only now: positions of a lost assignment must not be committed (librdkafka's
        # rd_kafka_cgrp_offsets_commit answers _ASSIGNMENT_LOST until the rebalance callback ran);
        # the member may have joined again meanwhile, and its new epoch would let them through,
        # moving back the offsets the partitions' new owner committed.
        self._maybe_auto_commit()
        revoked = self._owned - assignment
        if self._protocol == EAGER and self._owned and assignment - self._owned:
            # eager: the coordinator may hand partitions over in steps (as their old owners let
            # go); each step is a whole eager rebalance: give everything up, take all of it
            revoked = set(self._owned)
        if revoked:
            try:
                self._revoke(revoked, lost=False)
            finally:
                membership.applied(self._owned)
        added = assignment - self._owned
        if not added and not self._owned and membership.joined_empty():
            self._rebalance_callback(self._callbacks.get("assign"), [], assigning=True)
        if added:
            try:
                committed = self._committer.committed_offsets(added, self.config["request.timeout.ms"] / 1000.0,
                                                              wait_stable=False, with_epoch=True)
            except RiverlogError as e:   # unstable (an open transaction holds them) or unreachable: next poll
                log.debug("could not read committed offsets yet: %r", e)
                return
            tps = [_committed_partition(t, p, *committed.get((t, p), (OFFSET_INVALID, -1))) for t, p in sorted(added)]
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

    def _fenced(self) -> None:
        """Another instance took this member's ``group.instance.id``: librdkafka's
        ``rd_kafka_set_fatal_error`` for FENCED_INSTANCE_ID. The consumer is done: ``poll()``
        returns one ``_FATAL`` error event (``fatal()`` true; a consumer's fatal error goes to its
        queue, not to ``error_cb``), the partitions are unassigned without a rebalance callback
        (``rd_kafka_rebalance_op`` on a fatal error), and commits and ``subscribe()`` then fail
        with ``_FATAL``. Only ``close()`` is left to do."""
        reason = "Broker: Static consumer fenced by other consumer with same group.instance.id"
        error = KafkaError(KafkaError._FATAL, f"Fatal error: {reason}: Fatal consumer error: {reason}", fatal=True)
        self._fatal_error = error
        self._membership = None
        self._drop_subscription()
        self._owned.clear()
        with self._cond:
            self._fetch_state.assign([])
            self._fetch_state.events.append(Message(None, -1, OFFSET_INVALID, error=error))
        self._fetcher.kick()

    def _check_not_fatal(self) -> None:
        if self._fatal_error is not None:
            raise KafkaException(self._fatal_error)

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
        self._commit_leaving({(tp.topic, tp.partition) for tp in partitions})
        with self._cond:
            self._fetch_state.remove(partitions)
        self._fetcher.wake()

    def consumer_group_metadata(self) -> ConsumerGroupMetadata:
        self._check_open()
        member_id, epoch = self._member()
        return ConsumerGroupMetadata(self._group_id, member_id, epoch, self.config["group.instance.id"])

    def _member(self) -> tuple[str, int]:
        return self._membership.metadata() if self._membership is not None else ("", -1)

    def memberid(self) -> str | None:
        """This member's id in its group, or None before it joined."""
        self._check_open()
        member_id, _ = self._member()
        return member_id or None

    # --------------------------------------------------------------------------- positions
    def seek(self, partition: TopicPartition) -> None:
        """Move an assigned partition's position; data already fetched for it is discarded, and a
        partition stopped by an error event (``auto.offset.reset=error``) fetches again. An offset
        with a ``leader_epoch`` is validated against the leader's log first (KIP-320).

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
                self._fetch_state.seek(key, offset, -1 if partition.leader_epoch is None else partition.leader_epoch)
                assigned = True
            else:
                assigned = False
        if not assigned:
            if not self._known_partition(key):
                raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION,
                                                f"{key[0]} [{key[1]}] is not a known partition"))
            raise KafkaException(KafkaError(KafkaError._STATE, f"{key[0]} [{key[1]}] is not assigned"))
        self._fetcher.wake()

    def _known_partition(self, key) -> bool:
        """In the client's metadata: librdkafka's ``_UNKNOWN_PARTITION`` if not, else ``_STATE``."""
        topic = self.cluster.topics.get(key[0])
        return topic is not None and key[1] in topic.partitions

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """The offset of the next record poll() returns, with the leader epoch of the record before
        it (KIP-320); ``OFFSET_INVALID`` until it has one. As ``rd_kafka_position``, a partition the
        client does not know also gets ``TopicPartition.error`` ``_UNKNOWN_PARTITION``."""
        self._check_open()
        with self._cond:
            found = [self._fetch_state.app_position((tp.topic, tp.partition)) for tp in partitions]
        out = []
        for tp, position in zip(partitions, found):
            if position is None:
                position = TopicPartition(tp.topic, tp.partition, OFFSET_INVALID)
                if not self._known_partition((tp.topic, tp.partition)):
                    position._error = KafkaError(KafkaError._UNKNOWN_PARTITION)
            out.append(position)
        return out

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


def _committed_partition(topic: str, partition: int, offset: int, epoch: int) -> TopicPartition:
    """An assigned partition at its committed offset, with the leader epoch committed with it: the
    start position is validated against the leader's log (KIP-320)."""
    return TopicPartition(topic, partition, offset, leader_epoch=epoch if offset >= 0 and epoch >= 0 else None)
