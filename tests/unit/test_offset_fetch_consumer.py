"""The consumer's OffsetFetch of its own group as Kafka's ``CommitRequestManager`` sends and retries it
(KIP-848): it names the member while it has an epoch, sends a fetch answered ``STALE_MEMBER_EPOCH``
again with the epoch the next heartbeat brought, and fails at once on ``UNKNOWN_MEMBER_ID``. The
committer talks to the real group handlers and ``__consumer_offsets`` partition."""
from __future__ import annotations

import pytest

from broker.client.committer import OffsetCommitter
from broker.clock import ManualClock
from broker.errors import KafkaTimeoutError, StaleMemberEpochError, UnknownMemberIdError
from broker.proto import riverlog_pb2 as pb
from tests.unit.test_offset_fetch_validation import G, _beat, _member_with_offsets, handlers  # noqa: F401

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]


class Coordinator:
    """The group's coordinator as the committer reaches it: each call goes to the handlers;
    ``after(response)`` runs after each OffsetFetch (the heartbeat thread acting meanwhile)."""

    def __init__(self, handlers, after=lambda response: None):
        self.handlers, self.after = handlers, after
        self.sent: list[tuple[str, int | None]] = []   # (member id, member epoch or None) per OffsetFetch

    def call(self, method, request, timeout=None):
        assert method == "OffsetFetch"
        self.sent.append((request.member_id, request.member_epoch if request.HasField("member_epoch") else None))
        response = self.handlers.offset_fetch(request)
        self.after(response)
        return response

    def forget(self):
        pass


def _committer(coordinator, member) -> OffsetCommitter:
    config = {"retry.backoff.ms": 5, "request.timeout.ms": 10_000, "on_commit": None,
              "enable.auto.commit": False, "auto.commit.interval.ms": 5000, "isolation.level": "read_committed"}
    return OffsetCommitter(coordinator, config, G, member, ManualClock())


def test_a_member_names_itself_and_reads_its_groups_offsets(handlers):
    epoch = _member_with_offsets(handlers)
    coordinator = Coordinator(handlers)
    assert _committer(coordinator, lambda: ("m", epoch)).committed_offsets({("t", 0)}, 5) == {("t", 0): 100}
    assert coordinator.sent == [("m", epoch)]


@pytest.mark.parametrize("member", [("", -1), ("", 0), ("m", 0)], ids=["assign", "outside", "joining"])
def test_outside_the_group_or_before_its_first_epoch_no_member_is_named(handlers, member):
    # Kafka's MemberInfo has no epoch before the first one > 0 and after leaving: the request
    # names no member, and is answered even while the group has members
    _member_with_offsets(handlers)
    coordinator = Coordinator(handlers)
    assert _committer(coordinator, lambda: member).committed_offsets({("t", 0)}, 5) == {("t", 0): 100}
    assert coordinator.sent == [("", None)]


def _second_member_moves_the_epoch(handlers, epoch: int) -> int:
    """Member "n" joins; "m" (at ``epoch``) gives up what it is told to, and reaches the new epoch
    (returned) within a few heartbeats."""
    _beat(handlers, "n", 0)
    response = _beat(handlers, "m", epoch, owned=[pb.GroupPartitions(topic="t", partitions=[0, 1])])
    for _ in range(3):
        if response.member_epoch > epoch:
            return response.member_epoch
        response = _beat(handlers, "m", epoch, owned=response.assignment)
    raise AssertionError(f"member m did not move past epoch {epoch}: {response}")


def test_a_stale_epoch_is_sent_again_with_the_epoch_of_the_next_heartbeat(handlers):
    epoch = _member_with_offsets(handlers)
    current = _second_member_moves_the_epoch(handlers, epoch)
    known = {"epoch": epoch}                                 # what the consumer's membership knows

    def heartbeat_arrives(response):
        known["epoch"] = current

    coordinator = Coordinator(handlers, heartbeat_arrives)
    got = _committer(coordinator, lambda: ("m", known["epoch"])).committed_offsets({("t", 0)}, 5)
    assert got == {("t", 0): 100}
    assert coordinator.sent == [("m", epoch), ("m", current)]


def test_a_stale_epoch_fails_when_the_member_has_left_the_group_meanwhile(handlers):
    # isStaleEpochErrorAndValidEpochAvailable: no epoch any more, no retry
    epoch = _member_with_offsets(handlers)
    _second_member_moves_the_epoch(handlers, epoch)
    known = {"member": ("m", epoch)}
    coordinator = Coordinator(handlers, lambda response: known.update(member=("", 0)))
    with pytest.raises(StaleMemberEpochError):
        _committer(coordinator, lambda: known["member"]).committed_offsets({("t", 0)}, 5)
    assert coordinator.sent == [("m", epoch)]


def test_a_stale_epoch_that_never_catches_up_times_out(handlers):
    epoch = _member_with_offsets(handlers)
    _second_member_moves_the_epoch(handlers, epoch)
    coordinator = Coordinator(handlers)
    with pytest.raises(KafkaTimeoutError, match="STALE_MEMBER_EPOCH"):
        _committer(coordinator, lambda: ("m", epoch)).committed_offsets({("t", 0)}, 0.2)
    assert len(coordinator.sent) > 1 and set(coordinator.sent) == {("m", epoch)}


def test_the_group_step_does_not_wait_for_a_stale_epoch(handlers):
    # librdkafka serves the assignment again after the next heartbeat, never blocking poll()
    epoch = _member_with_offsets(handlers)
    _second_member_moves_the_epoch(handlers, epoch)
    coordinator = Coordinator(handlers)
    with pytest.raises(StaleMemberEpochError):
        _committer(coordinator, lambda: ("m", epoch)).committed_offsets({("t", 0)}, 5, wait_stable=False)
    assert coordinator.sent == [("m", epoch)]


def test_an_unknown_member_fails_at_once(handlers):
    epoch = _member_with_offsets(handlers)
    _beat(handlers, "m", -1)                                  # removed from the group
    coordinator = Coordinator(handlers)
    with pytest.raises(UnknownMemberIdError):
        _committer(coordinator, lambda: ("m", epoch)).committed_offsets({("t", 0)}, 5)
    assert coordinator.sent == [("m", epoch)]
