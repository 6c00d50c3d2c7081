"""The consumer's side of the KIP-848 protocol (broker/client/membership.py and the rebalance steps
of broker/client/consumer_assignment.py), driven without a broker: the heartbeat thread talks to the
real group coordinator (broker/group) in-process, and the application's side is the consumer's
assignment mixin over a real FetchState. Scenarios from Kafka's ConsumerMembershipManagerTest and
AbstractHeartbeatRequestManager, and librdkafka's rd_kafka_cgrp_consumer_* handling."""
from __future__ import annotations

import threading
import time

import pytest

from broker.client.config import CONSUMER_CONFIG, client_config
from broker.client.consumer_assignment import ConsumerAssignment
from broker.client.fetch_state import FetchState
from broker.client.message import TopicPartition
from broker.client.start_offsets import AUTO_OFFSET_RESET
from broker.clock import SYSTEM_CLOCK
from broker.errors import (BrokerNotAvailableError, CoordinatorLoadInProgressError, CoordinatorNotAvailableError,
                           FencedMemberEpochError, GroupIdNotFoundError, InvalidRequestError, KafkaTimeoutError,
                           NetworkError, NotCoordinatorError, RequestTimedOutError, RiverlogError, UnknownServerError,
                           UnsupportedVersionError)
from broker.group.coordinator import GroupShard
from broker.proto import riverlog_pb2 as pb
from broker.proto.partitions import grouped, pairs

pytestmark = pytest.mark.unit

G = "g"


class InProcessCoordinator:
    """The group coordinator as the broker's handler calls it, with a clock the test moves and a
    queue of errors the next calls answer instead (a coordinator moving, a refused request)."""

    def __init__(self, sizes: dict[str, int]):
        self.group_id = G
        self.shard = GroupShard(0)
        self.sizes = sizes
        self.now = 0
        self.errors: list[RiverlogError] = []
        self.requests: list[pb.ConsumerGroupHeartbeatRequest] = []
        self.lock = threading.Lock()

    def call(self, method, request, timeout=None):
        assert method == "ConsumerGroupHeartbeat"
        with self.lock:
            self.requests.append(request)
            if self.errors:
                raise self.errors.pop(0)
            self.now += 1
            result, _ = self.shard.heartbeat(
                G, request.member_id, request.member_epoch, partitions=self.sizes, now_ms=self.now,
                instance_id=request.instance_id, client_id=request.client_id,
                topics=list(request.subscribed_topics), assignor_name=request.assignor,
                session_timeout_ms=request.session_timeout_ms or 45_000,
                rebalance_timeout_ms=request.rebalance_timeout_ms or 300_000, owned=set(pairs(request.owned)))
            return pb.ConsumerGroupHeartbeatResponse(
                member_id=result.member_id, member_epoch=result.member_epoch, heartbeat_interval_ms=20,
                assignment=grouped(result.assignment), reconciling=result.reconciling)

    def expire(self, after_ms: int) -> None:
        """The member's session ran out at the coordinator: its partitions are free for others."""
        with self.lock:
            self.now += after_ms
            self.shard.expire(self.sizes, self.now)


class Committer:
    def __init__(self):
        self.commits: list[list[TopicPartition]] = []

    def commit_sync(self, offsets, timeout, retry_stale_epoch=False):
        self.commits.append(list(offsets))

    def committed_offsets(self, keys, timeout, wait_stable=True, with_epoch=False):
        return {}

    def auto_commit_due(self):
        return False

    def serve(self):
        pass


class Nothing:
    def __getattr__(self, name):
        return lambda *a, **k: None


class AppSide(ConsumerAssignment):
    """What Consumer gives its assignment mixin, minus the fetcher and the network."""

    def __init__(self, coordinator: InProcessCoordinator, **conf):
        self.config = client_config(CONSUMER_CONFIG, {"group.id": G, "bootstrap.servers": "unused:1",
                                                      "heartbeat.interval.ms": 20, **conf}, {})
        self._cond = threading.Condition()
        self._fetch_state = FetchState(AUTO_OFFSET_RESET["earliest"], False, 0.1, 1 << 20, SYSTEM_CLOCK)
        self._fetcher, self._events = Nothing(), Nothing()
        self._committer = Committer()
        self._coordinator = coordinator
        self._membership = self._subscription = self._fatal_error = self._protocol = None
        self._callbacks, self._owned, self._assign_calls = {}, set(), 0
        self.calls: list[tuple[str, list]] = []

    def _check_open(self):
        pass

    def _to_commit(self, keys=None):
        return [TopicPartition(t, p, 42) for t, p in sorted(keys)]

    def _maybe_auto_commit(self):
        pass

    def subscribe_recording(self, topics):
        record = {name: (lambda name: lambda c, ps: self.calls.append(
            (name, [(tp.topic, tp.partition) for tp in ps])))(name) for name in ("assign", "revoke", "lost")}
        self.subscribe(topics, on_assign=record["assign"], on_revoke=record["revoke"], on_lost=record["lost"])

    def poll_until(self, done, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < deadline, f"not reached; callbacks so far: {self.calls}"
            self._group_step()
            with self._cond:
                self._cond.wait(0.02)


def _wait(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


@pytest.fixture
def coordinator():
    return InProcessCoordinator({"t": 2})


@pytest.fixture
def app(coordinator):
    apps = []

    def make(**conf):
        a = AppSide(coordinator, **conf)
        apps.append(a)
        return a
    yield make
    for a in apps:
        if a._membership is not None:
            a._membership.close(1.0)


def _joined(a: AppSide) -> None:
    a.subscribe_recording(["t"])
    a.poll_until(lambda: a._owned == {("t", 0), ("t", 1)})
    assert a.calls == [("assign", [("t", 0), ("t", 1)])]
    a.calls.clear()


# ----------------------------------------------------------------------------------- leaving after a loss
def test_close_after_the_session_expired_reports_the_partitions_lost_and_commits_nothing(coordinator, app):
    """Kafka's AbstractMembershipManager.invokeOnPartitionsRevokedOrLostToReleaseAssignment: a member
    leaving while fenced (epoch 0) releases its partitions with onPartitionsLost, not
    onPartitionsRevoked, and commits nothing: their new owner may have committed further."""
    a = app()
    _joined(a)
    membership = a._membership
    coordinator.expire(60_000)
    _wait(lambda: membership.assignment_lost)  # the heartbeat was answered UNKNOWN_MEMBER_ID
    a.unsubscribe()                            # close() does this: no poll() in between
    assert a.calls == [("lost", [("t", 0), ("t", 1)])]
    assert a._committer.commits == []
    assert a._owned == set()


def test_close_after_max_poll_interval_exceeded_reports_the_partitions_lost_and_commits_nothing(coordinator, app):
    """The member left for a late poll() (its partitions went to others); closing before polling
    again must not commit their positions over the new owner's."""
    a = app(**{"max.poll.interval.ms": 200})
    _joined(a)
    membership = a._membership
    _wait(lambda: membership.assignment_lost)  # no poll() for 200 ms: it left the group
    a.unsubscribe()
    assert a.calls == [("lost", [("t", 0), ("t", 1)])]
    assert a._committer.commits == []


def test_unsubscribe_of_a_member_in_good_standing_revokes_and_commits_first(coordinator, app):
    """guard (already matched): Kafka's onPartitionsRevoked with the auto-commit before it."""
    a = app()
    _joined(a)
    a.unsubscribe()
    assert a.calls == [("revoke", [("t", 0), ("t", 1)])]
    assert [[(tp.topic, tp.partition, tp.offset) for tp in c] for c in a._committer.commits] == [
        [("t", 0, 42), ("t", 1, 42)]]
    assert coordinator.requests[-1].member_epoch == -1


# ----------------------------------------------------------------------------------- heartbeat errors
@pytest.mark.parametrize("error", [InvalidRequestError("MemberId can't be empty."),
                                   UnsupportedVersionError("ConsumerGroupHeartbeat is not supported"),
                                   UnknownServerError("RuntimeError while handling ConsumerGroupHeartbeat"),
                                   GroupIdNotFoundError("group 'g' does not exist")])
def test_a_refused_heartbeat_is_fatal_raised_from_poll_and_the_partitions_are_lost(coordinator, app, error):
    """Kafka's AbstractHeartbeatRequestManager.onErrorResponse: INVALID_REQUEST, UNSUPPORTED_VERSION
    and every error it does not list (UNKNOWN_SERVER_ERROR among them; librdkafka makes a permanent
    one such as GROUP_ID_NOT_FOUND fatal too) are handleFatalFailure (the error reaches poll(), the
    member stops heartbeating) rather than a heartbeat retried forever behind the application's back."""
    a = app()
    _joined(a)
    membership = a._membership
    coordinator.errors.append(error)
    with pytest.raises(type(error)):
        a.poll_until(lambda: False, timeout=5.0)
    assert a.calls == [("lost", [("t", 0), ("t", 1)])]
    _wait(lambda: not membership._thread.is_alive())  # it stopped heartbeating


@pytest.mark.parametrize("error", [NotCoordinatorError, CoordinatorNotAvailableError, CoordinatorLoadInProgressError,
                                   NetworkError, KafkaTimeoutError, BrokerNotAvailableError, RequestTimedOutError])
def test_a_coordinator_moving_is_retried_without_losing_the_assignment(coordinator, app, error):
    """NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE and COORDINATOR_LOAD_IN_PROGRESS are retried (the
    coordinator found again), as are a broken connection, a timeout and a broker still starting,
    and the member keeps its partitions and its epoch."""
    a = app()
    _joined(a)
    member_id, epoch = a._membership.metadata()
    asked = len(coordinator.requests)
    coordinator.errors.extend([error("moved"), error("moved again")])
    _wait(lambda: len(coordinator.requests) >= asked + 3)
    for _ in range(3):
        a._group_step()
    assert a.calls == [] and a._owned == {("t", 0), ("t", 1)}
    assert a._membership.metadata() == (member_id, epoch)


# ----------------------------------------------------------------------------------- fencing
def test_a_fenced_member_loses_its_partitions_then_replaces_its_old_incarnation(coordinator, app):
    """Kafka's ConsumerMembershipManager.transitionToFenced: FENCED_MEMBER_EPOCH makes the member
    give its partitions up (onPartitionsLost) and only then join again under the same member id
    (KIP-1082), replacing its fenced incarnation at the coordinator. The old incarnation must not
    linger holding half the partitions until its session expires."""
    a = app()
    _joined(a)
    old_id, _ = a._membership.metadata()
    asked = len(coordinator.requests)
    coordinator.errors.append(FencedMemberEpochError("epoch 1 is fenced"))
    _wait(lambda: a._membership.assignment_lost)
    assert all(r.member_epoch != 0 for r in coordinator.requests[asked:]), \
        "joined again before the application let its lost partitions go"
    a.poll_until(lambda: a.calls[-1:] == [("assign", [("t", 0), ("t", 1)])], timeout=5.0)
    assert a.calls[0] == ("lost", [("t", 0), ("t", 1)])
    assert list(coordinator.shard.groups[G].members) == [old_id]   # itself again, not a second member
    assert coordinator.requests[-1].member_id == old_id


# ----------------------------------------------------------------------------------- subscription changes
def test_subscribing_again_changes_the_subscription_in_place(app, coordinator):
    """librdkafka's rd_kafka_cgrp_consumer_subscribe (and Kafka's consumer): a new subscription of a
    subscribed member goes out in its next heartbeat; it does not leave the group. Partitions of
    topics it still subscribes to stay (cooperative: no callback for them)."""
    coordinator.sizes["u"] = 1
    a = app(**{"partition.assignment.strategy": "cooperative-sticky"})
    _joined(a)
    member_id, _ = a._membership.metadata()
    a.subscribe_recording(["t", "u"])
    a.poll_until(lambda: ("u", 0) in a._owned)
    assert a.calls == [("assign", [("u", 0)])]
    assert a._membership.metadata()[0] == member_id
    assert all(r.member_epoch >= 0 for r in coordinator.requests), "it left the group"
    a.calls.clear()
    a.subscribe_recording(["u"])
    a.poll_until(lambda: a._owned == {("u", 0)})
    assert a.calls == [("revoke", [("t", 0), ("t", 1)])]
    assert [[(tp.topic, tp.partition) for tp in c] for c in a._committer.commits] == [[("t", 0), ("t", 1)]]


def test_subscribing_after_a_fatal_error_joins_again(app, coordinator):
    """guard (already matched): a membership that a fatal error ended is not updated in place; the
    new subscription joins as a new member (on_lost for what the old one held)."""
    a = app()
    _joined(a)
    old = a._membership
    old_id, _ = old.metadata()
    coordinator.errors.append(InvalidRequestError("refused"))
    _wait(lambda: old.fatal is not None)
    a.subscribe_recording(["t"])
    assert a.calls == [("lost", [("t", 0), ("t", 1)])]
    assert a._membership is not old
    _wait(lambda: a._membership.metadata()[0] not in ("", old_id))  # joined as a new member
