"""A consumer's membership of its group: the heartbeat thread and the assignment it receives.

The coordinator decides who owns what (``broker.group``); this side reports what the application
owns and takes in the assignment. Nothing here touches fetching: the consumer applies a new
assignment on the application's thread, inside ``poll()``, where the rebalance callbacks run
(:meth:`GroupMembership.pending`), then tells this side what it owns now (:meth:`applied`).

What a heartbeat reports as owned is conservative: what the application holds *and* what it has
been given but not yet taken up, so the coordinator never hands a partition to another member
while this one might still be reading it.

If ``poll()`` is not called within ``max.poll.interval.ms`` the member leaves the group (its
partitions go to others) and joins again at the next poll, as Kafka's consumer does; that poll
first returns a ``_MAX_POLL_EXCEEDED`` error event, as librdkafka's
``rd_kafka_cgrp_max_poll_interval_check_tmr_cb`` queues one. A static
member (``group.instance.id``) leaves with epoch -2, as Kafka's does: the coordinator keeps its
partitions for ``session.timeout.ms``, and when it joins again within that time it gets them back
with no rebalance.

If no heartbeat succeeds for ``session.timeout.ms`` (the coordinator is unreachable, while fetches
may still work), the coordinator has given the partitions to others by now: the member treats them
as lost (``on_lost``) and joins again, as librdkafka's ``rd_kafka_cgrp_session_timeout_check`` does,
instead of consuming them beside their new owner.

The member id is the consumer's own (KIP-1082, as Kafka's ``AbstractMembershipManager`` and
librdkafka's ``rd_kafka_cgrp_new`` make it): generated once, sent with every heartbeat from the
first join on, and kept when the member joins again after being fenced, after leaving or after
its session ran out. A join whose answer was lost is sent again under the same id, so the
coordinator does not gain a second member; a leave can name the member even before the answer to
its join arrived.
"""
from __future__ import annotations

import logging
import threading
import time

from broker.client.coordinator import CoordinatorClient, new_member_id
from broker.errors import KafkaError
from broker.errors import (FencedInstanceIdError, FencedMemberEpochError, GroupMaxSizeReachedError,
                           InvalidRequestError, InvalidSessionTimeoutError, NetworkError, RiverlogError,
                           UnknownMemberIdError, UnsupportedAssignorError, UnsupportedVersionError)
from broker.proto import riverlog_pb2 as pb
from broker.proto.partitions import grouped

log = logging.getLogger(__name__)

TP = tuple[str, int]
_QUICK_S = 0.05  # heartbeat pace while partitions are moving
# Answers that joining again would only get again: fatal to the membership, as Kafka's
# AbstractHeartbeatRequestManager.onErrorResponse calls handleFatalFailure for them. So is any
# other error that is not retriable (UNKNOWN_SERVER_ERROR, GROUP_ID_NOT_FOUND, ...): Kafka's
# default branch and librdkafka's permanent errors (rd_kafka_cgrp_handle_ConsumerGroupHeartbeat).
_FATAL = (FencedInstanceIdError, UnsupportedAssignorError, InvalidSessionTimeoutError, GroupMaxSizeReachedError,
          InvalidRequestError, UnsupportedVersionError)


def _fatal(error: RiverlogError) -> bool:
    """Does this heartbeat error end the membership? Retriable ones (the coordinator moving or
    loading, a broken connection, a timeout) are retried instead; UNKNOWN_MEMBER_ID and
    FENCED_MEMBER_EPOCH make the member join again (handled before this is asked)."""
    return isinstance(error, _FATAL) or not (error.retriable or isinstance(error, NetworkError))


class GroupMembership:
    def __init__(self, coordinator: CoordinatorClient, config, topics: list[str], wake):
        self.coordinator = coordinator
        self.config = config
        self.topics = sorted(set(topics))
        self._wake_consumer = wake
        self._cond = threading.Condition()
        self.member_id = getattr(coordinator, "member_id", "") or new_member_id()
        self._in_group = False    # the coordinator answered a join of this member, and it has not left since
        self._join_sent = False   # a join may have reached the coordinator: a leave must be sent
        self._new_topics = False  # the subscription changed: ask for its topics' metadata first
        self._fenced = False  # a fenced dynamic member: it leaves once its loss is handled, then joins again
        self.epoch = 0
        self._assignment: set[TP] = set()   # what the coordinator last said we may own
        self._owned: set[TP] = set()        # what the application holds
        self._lost = False
        self._fatal: RiverlogError | None = None
        self._last_poll = time.monotonic()
        self._blocked_in_poll = False  # the application waits inside poll(): it is polling
        self._left_for_poll_timeout = False
        self._poll_exceeded: KafkaError | None = None  # reported by the next poll()
        self._leaving: int | None = None
        self._session_deadline: float | None = None  # monotonic; no successful heartbeat by then: lost
        self._joining = False       # a rebalance for this member whose outcome is not settled yet
        self._joined_empty = False  # it settled on nothing: on_assign([]) is due (joined_empty)
        self._stopped = False
        self._interval = min(config["heartbeat.interval.ms"], config["session.timeout.ms"] // 3) / 1000.0
        self._thread = threading.Thread(target=self._run, name="riverlog-heartbeat", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------------------ app side
    def polled(self) -> None:
        """The application called poll(); rejoin if we left because it had not for too long."""
        with self._cond:
            self._last_poll = time.monotonic()
            if self._left_for_poll_timeout:
                self._left_for_poll_timeout = False
                self._cond.notify_all()

    def blocking(self, blocked: bool) -> None:
        """The application waits inside ``poll()`` (True), or that wait ended: meanwhile the poll
        interval is not counted, as librdkafka's ``rd_kafka_app_poll_start``. Plain writes (the
        consumer calls this under its own lock, which the heartbeat thread may wait for)."""
        if not blocked:
            self._last_poll = time.monotonic()
        self._blocked_in_poll = blocked

    def poll_exceeded(self) -> KafkaError | None:
        """The ``_MAX_POLL_EXCEEDED`` error to report once, if the member left for a late poll()."""
        with self._cond:
            error, self._poll_exceeded = self._poll_exceeded, None
            return error

    def pending(self) -> tuple[set[TP], bool, RiverlogError | None]:
        """(the assignment to apply, whether what we owned was lost, a fatal error). An assignment
        whose session ran out meanwhile (the heartbeat thread could not run: the process was
        paused) is not handed out: the coordinator may have given it to another member."""
        self._check_session(None)
        with self._cond:
            lost, self._lost = self._lost, False
            return set(self._assignment), lost, self._fatal

    @property
    def assignment_lost(self) -> bool:
        """Partitions were lost and the next ``poll()`` has not handled it yet (``on_lost``)."""
        with self._cond:
            return self._lost

    def joined_empty(self) -> bool:
        """Once per rebalance that leaves the member nothing: its first settled assignment after
        joining, or after partitions were taken away, is empty. librdkafka calls the rebalance
        callback with every assignment a rebalance brings, an empty one too
        (``rd_kafka_cgrp_handle_assignment``; ``rd_kafka_rebalance_op_incr`` for cooperative), so
        an application waiting for ``on_assign`` learns its consumer is in the group with nothing
        to read."""
        with self._cond:
            due, self._joined_empty = self._joined_empty, False
            return due and not self._assignment

    def applied(self, owned: set[TP]) -> None:
        """The application now holds ``owned``: tell the coordinator at once."""
        with self._cond:
            self._owned = set(owned)
            self._cond.notify_all()

    @property
    def fatal(self) -> RiverlogError | None:
        """The error that ended this membership, if one did."""
        with self._cond:
            return self._fatal

    def subscribe(self, topics: list[str]) -> None:
        """A new subscription: sent at once, in the next heartbeat."""
        with self._cond:
            self.topics = sorted(set(topics))
            self._new_topics = True
            self._cond.notify_all()

    def metadata(self) -> tuple[str, int]:
        """(member id, member epoch); the member id is "" while the member is not in the group."""
        with self._cond:
            return (self.member_id if self._in_group else ""), self.epoch

    def close(self, timeout: float = 5.0) -> None:
        """Leave the group (a static member leaves "for now", keeping its partitions a while)."""
        with self._cond:
            if self._stopped:
                return
            self._leaving = -2 if self.config["group.instance.id"] else -1
            self._cond.notify_all()
        self._thread.join(timeout)
        with self._cond:
            self._stopped = True
            self._cond.notify_all()

    # ------------------------------------------------------------------------------ the thread
    def _run(self) -> None:
        while True:
            wait = self._step()
            if wait is None:
                return
            with self._cond:
                if not self._stopped and self._leaving is None:
                    self._cond.wait(wait)

    def _step(self) -> float | None:
        """One turn of the heartbeat thread: a heartbeat, a leave, or nothing while a member that
        left for a late poll() waits for the application; returns how long to wait before the
        next turn, or None once the membership is over."""
        with self._cond:
            if self._stopped:
                return None
            if self._left_for_poll_timeout and self._leaving is None:
                return 0.5  # polled() and close() notify
            leaving = self._leaving
            if leaving is None and self._poll_overdue():
                # Kafka's leaveGroupEpoch: a static member leaves "for now" (-2), so the
                # coordinator keeps its partitions for its session and no rebalance happens
                # unless it stays away longer.
                leaving = -2 if self.config["group.instance.id"] else -1
        if leaving is not None:
            self._leave(leaving)
            if self._leaving is not None:
                return None
            self._left_for_poll()
            return 0.0
        self._check_session(None)
        try:
            return self._beat()
        except Exception as e:  # noqa: BLE001 - a bug must not end the heartbeats unseen: logged, retried
            log.exception("group '%s': heartbeat failed", self.coordinator.group_id)
            self._check_session(e)  # the session running out still makes the partitions lost
            return self.config["retry.backoff.ms"] / 1000.0

    def _poll_overdue(self) -> bool:
        interval_ms = self.config["max.poll.interval.ms"]
        if self._blocked_in_poll:
            return False
        exceeded_ms = int((time.monotonic() - self._last_poll) * 1000) - interval_ms
        overdue = exceeded_ms > 0 and self._in_group
        if overdue:
            log.warning("poll() was not called within max.poll.interval.ms=%d: leaving group '%s'",
                        interval_ms, self.coordinator.group_id)
            self._poll_exceeded = KafkaError(KafkaError._MAX_POLL_EXCEEDED, (
                f"Application maximum poll interval ({interval_ms}ms) exceeded by {exceeded_ms}ms"))
        return overdue

    def _left_for_poll(self) -> None:
        with self._cond:
            self._left_for_poll_timeout = True
            self._lost = True
            self._assignment = set()
        self._wake_consumer()

    def _request(self, epoch: int) -> pb.ConsumerGroupHeartbeatRequest:
        cfg = self.config
        with self._cond:
            owned = self._owned | self._assignment
            member_id = self.member_id
            self._join_sent = self._join_sent or epoch == 0
        return pb.ConsumerGroupHeartbeatRequest(
            group_id=self.coordinator.group_id, member_id=member_id, member_epoch=epoch,
            instance_id=cfg["group.instance.id"], client_id=cfg["client.id"], subscribed_topics=self.topics,
            assignor=cfg["partition.assignment.strategy"], session_timeout_ms=cfg["session.timeout.ms"],
            rebalance_timeout_ms=cfg["max.poll.interval.ms"], owned=grouped(owned))

    def _ask_for_topics(self) -> None:
        """On joining, ask for the subscribed topics' metadata, so a broker with
        auto.create.topics.enable creates unknown ones (allow.auto.create.topics), as Kafka's
        consumer does; the group then assigns their partitions."""
        cluster = getattr(self.coordinator, "cluster", None)
        if cluster is None or not cluster.allow_auto_create or not self.topics:
            return
        try:
            cluster.refresh([t for t in self.topics if not t.startswith("^")])
        except RiverlogError as e:
            log.debug("metadata of subscribed topics: %r", e)

    def _beat(self) -> float:
        """One heartbeat; returns how long to wait before the next."""
        with self._cond:
            epoch = self.epoch if self._in_group else 0
            fenced, holding = self._fenced, bool(self._owned)
            ask, self._new_topics = self._new_topics or epoch == 0, False
        if fenced:
            if holding:  # Kafka's FENCED state: no heartbeat until the application let them go (on_lost)
                return self._interval
            self._leave(-1)
        if ask:
            self._ask_for_topics()
        try:
            response = self.coordinator.call("ConsumerGroupHeartbeat", self._request(epoch),
                                             timeout=max(self._interval * 2, 1.0))
        except (UnknownMemberIdError, FencedMemberEpochError) as e:
            log.info("group '%s': %s; rejoining", self.coordinator.group_id, e)
            if isinstance(e, FencedMemberEpochError) and not self.config["group.instance.id"]:
                # The coordinator still has this member at another epoch, holding partitions: it
                # leaves first, then joins again under the same id (a static member's join
                # replaces it by its instance id).
                with self._cond:
                    self._fenced = True
            self._reset(lost=True)
            return 0
        except RiverlogError as e:
            if not _fatal(e):
                log.debug("heartbeat failed: %r", e)
                self._check_session(e)
                return self.config["retry.backoff.ms"] / 1000.0
            # Fatal to the membership: raised from the next poll() (and given to error_cb), as Kafka's
            # consumer raises InconsistentGroupProtocol and InvalidSessionTimeout from poll(); joining
            # again would only be refused again.
            log.warning("group '%s': %s", self.coordinator.group_id, e)
            with self._cond:
                self._fatal = e
                self._reset(lost=True)
                self._stopped = True
            self._wake_consumer()
            return 0
        assignment = {(g.topic, p) for g in response.assignment for p in g.partitions}
        with self._cond:
            if not self._in_group or self._assignment - assignment:
                self._joining = True  # a join, or partitions taken away: a rebalance for this member
            settled_empty = self._joining and not response.reconciling and not assignment
            if self._joining and not response.reconciling:
                self._joining, self._joined_empty = False, settled_empty
            # a coordinator that makes member ids itself (for a join naming none) may answer another
            self.member_id = response.member_id or self.member_id
            self.epoch, self._in_group, self._join_sent = response.member_epoch, True, True
            self._session_deadline = time.monotonic() + self.config["session.timeout.ms"] / 1000.0
            changed = assignment != self._assignment
            self._assignment = assignment
            settled = self._owned == assignment and not response.reconciling
        if changed or settled_empty:
            self._wake_consumer()
        interval = min(response.heartbeat_interval_ms / 1000.0 or self._interval, self._interval)
        return interval if settled else _QUICK_S

    def _check_session(self, error: BaseException | None) -> None:
        """librdkafka's ``rd_kafka_cgrp_session_timeout_check``: no successful heartbeat response
        for ``session.timeout.ms`` means the coordinator has expired this member and handed its
        partitions on; they are lost, and the member joins again as a new one. Checked on every
        turn of the heartbeat thread and when the application takes up an assignment, as
        librdkafka checks it on every turn of its group loop, not only after a failed heartbeat."""
        with self._cond:
            deadline = self._session_deadline
            if not self._in_group or deadline is None or time.monotonic() < deadline:
                return
        log.warning("Consumer group session timed out after %d ms without a successful response from the "
                    "group coordinator (last error was %s): revoking assignment and rejoining group '%s'",
                    self.config["session.timeout.ms"], error or "none", self.coordinator.group_id)
        self._reset(lost=True)

    def _reset(self, lost: bool) -> None:
        """Out of the group (the member id is kept): the next heartbeat joins again."""
        with self._cond:
            self.epoch, self._in_group = 0, False
            self._session_deadline = None
            self._assignment = set()
            self._lost = self._lost or lost
        self._wake_consumer()

    def _leave(self, epoch: int) -> None:
        with self._cond:
            member_id = self.member_id if self._in_group or self._join_sent or self._fenced else ""
            self._fenced = False
        if member_id:
            try:
                self.coordinator.call("ConsumerGroupHeartbeat", pb.ConsumerGroupHeartbeatRequest(
                    group_id=self.coordinator.group_id, member_id=member_id, member_epoch=epoch,
                    instance_id=self.config["group.instance.id"]), timeout=3.0)
            except RiverlogError as e:
                log.debug("leaving the group failed: %r", e)
        with self._cond:
            self.epoch, self._in_group, self._join_sent = 0, False, False
            self._session_deadline = None
            self._assignment = set()
