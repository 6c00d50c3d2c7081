"""The order in which a consumer's commits reach its coordinator."""
from __future__ import annotations

import threading

import pytest

from broker.client.committer import OffsetCommitter
from broker.client.message import TopicPartition
from broker.clock import ManualClock
from broker.proto import riverlog_pb2 as pb

pytestmark = [pytest.mark.unit, pytest.mark.timeout(30)]


class HeldCoordinator:
    """Answers OffsetCommit, holding the first call until ``release`` is set; records what arrived."""

    def __init__(self):
        self.arrived: list[int] = []
        self.first_started = threading.Event()
        self.release = threading.Event()

    def call(self, method, request, timeout=None):
        assert method == "OffsetCommit"
        offset = request.topics[0].partitions[0].offset
        if not self.first_started.is_set():
            self.first_started.set()
            assert self.release.wait(10)
        self.arrived.append(offset)
        return pb.OffsetCommitResponse()

    def forget(self):
        pass


def committer(coordinator, on_commit=None) -> OffsetCommitter:
    config = {"retry.backoff.ms": 10, "request.timeout.ms": 10_000, "on_commit": on_commit,
              "enable.auto.commit": True, "auto.commit.interval.ms": 5000}
    return OffsetCommitter(coordinator, config, "g", lambda: ("m", 1), ManualClock())


def test_a_synchronous_commit_waits_for_the_asynchronous_commits_made_before_it():
    """The commit on revocation must land last: an automatic commit of an older position landing
    after it would move the group back, and the partition's next owner would read records again."""
    coordinator = HeldCoordinator()
    c = committer(coordinator)
    c.commit_async([TopicPartition("orders", 0, 10)])
    assert coordinator.first_started.wait(10)
    done = threading.Event()
    sync = threading.Thread(target=lambda: (c.commit_sync([TopicPartition("orders", 0, 91)], 10), done.set()))
    sync.start()
    assert not done.wait(0.2)          # still behind the asynchronous commit
    coordinator.release.set()
    sync.join(10)
    assert done.is_set() and coordinator.arrived == [10, 91]
    c.close()


def test_an_on_commit_callback_may_commit_synchronously_without_waiting_for_itself():
    coordinator = HeldCoordinator()
    coordinator.first_started.set()    # nothing held
    committed = threading.Event()

    def on_commit(error, partitions):
        if partitions[0].offset == 1:
            c.commit_sync([TopicPartition("orders", 0, 2)], 10)
            committed.set()
    c = committer(coordinator, on_commit)
    c.commit_async([TopicPartition("orders", 0, 1)])
    assert committed.wait(5)
    assert coordinator.arrived == [1, 2]
    c.close()
