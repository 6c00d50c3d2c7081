"""The order in which a consumer's commits reach its coordinator."""
from __future__ import annotations

import threading

import pytest

from broker.client.committer import OffsetCommitter
from broker.client.message import TopicPartition
from broker.clock import ManualClock
from broker.errors import KafkaError, NonEmptyGroupError, StaleMemberEpochError
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


def test_an_on_commit_callback_may_commit_synchronously():
    coordinator = HeldCoordinator()
    coordinator.first_started.set()    # nothing held
    committed = []

    def on_commit(error, partitions):
        if partitions[0].offset == 1:
            committed.append(c.commit_sync([TopicPartition("orders", 0, 2)], 10))
    c = committer(coordinator, on_commit)
    c.commit_async([TopicPartition("orders", 0, 1)])
    c.close()                          # waits for the asynchronous commit
    assert c.serve() == 1 and committed == [[TopicPartition("orders", 0, 2)]]
    assert coordinator.arrived == [1, 2]


class RefusingCoordinator:
    """Refuses partition 1 of each OffsetCommit (the group has members), commits the others."""

    def call(self, method, request, timeout=None):
        response = pb.OffsetCommitResponse()
        response.results.add(topic="orders", partition=1, error_code=NonEmptyGroupError.code,
                             error_message="the group has members")
        return response

    def forget(self):
        pass


def test_on_commit_is_served_on_the_callers_thread_with_a_kafka_error_and_each_partitions_error():
    """As confluent-kafka: ``err`` is a KafkaError (``err.code()`` is a method) and the callback runs
    where the application serves its consumer (poll/consume/close), not on a background thread."""
    seen, woken = [], threading.Event()
    c = OffsetCommitter(RefusingCoordinator(), {"retry.backoff.ms": 10, "request.timeout.ms": 10_000,
                                                "on_commit": lambda err, tps: seen.append(
                                                    (err, tps, threading.current_thread()))},
                        "g", lambda: ("m", 1), ManualClock(), woken.set)
    c.commit_async([TopicPartition("orders", 0, 5), TopicPartition("orders", 1, 7)])
    assert woken.wait(10) and seen == []
    assert c.serve() == 1
    [(err, tps, thread)] = seen
    assert thread is threading.current_thread()
    assert isinstance(err, KafkaError) and err.code() == KafkaError.NON_EMPTY_GROUP
    assert [(tp.partition, tp.offset, tp.error) for tp in tps] == [(0, 5, None), (1, 7, KafkaError.NON_EMPTY_GROUP)]
    assert isinstance(tps[1].error, KafkaError) and c.serve() == 0
    c.close()


class EpochCoordinator:
    """A member whose epoch moved to 4 while its commits still carry 3: refuses any other epoch
    with ``StaleMemberEpochError``; records the epochs that arrived."""

    def __init__(self):
        self.epochs: list[int] = []

    def call(self, method, request, timeout=None):
        self.epochs.append(request.member_epoch)
        response = pb.OffsetCommitResponse()
        if request.member_epoch != 4:
            for t in request.topics:
                for p in t.partitions:
                    response.results.add(topic=t.name, partition=p.partition, error_code=StaleMemberEpochError.code,
                                         error_message="stale member epoch")
        return response

    def forget(self):
        pass


def test_a_commit_with_a_stale_member_epoch_fails_and_is_not_sent_again_with_the_new_epoch():
    """Kafka's CommitRequestManager fails it (CommitFailedException): the member's epoch moved, so
    the partition may be another member's now, and a retry under the new epoch would commit it."""
    coordinator, view = EpochCoordinator(), ["m", 3]
    seen = []
    config = {"retry.backoff.ms": 10, "request.timeout.ms": 10_000, "on_commit": lambda err, tps: seen.append(err),
              "enable.auto.commit": False, "auto.commit.interval.ms": 5000}
    c = OffsetCommitter(coordinator, config, "g", lambda: tuple(view), ManualClock())
    view_moves = threading.Timer(0.05, lambda: view.__setitem__(1, 4))  # the next heartbeat brings epoch 4
    view_moves.start()
    with pytest.raises(StaleMemberEpochError):
        c.commit_sync([TopicPartition("orders", 1, 42)], 5)
    view_moves.join()
    assert coordinator.epochs == [3]
    view[1] = 3
    c.commit_async([TopicPartition("orders", 1, 43)])
    view[1] = 4
    c.close()
    assert c.serve() == 1 and seen[0].code() == KafkaError.STALE_MEMBER_EPOCH and coordinator.epochs == [3, 3]


def test_the_commit_before_revocation_is_sent_again_with_the_epoch_the_next_heartbeat_brought():
    """As Kafka's maybeAutoCommitSyncBeforeRevocation: it commits partitions the member still owns."""
    coordinator, view = EpochCoordinator(), ["m", 3]
    c = OffsetCommitter(coordinator, {"retry.backoff.ms": 10, "request.timeout.ms": 10_000, "on_commit": None,
                                      "enable.auto.commit": True, "auto.commit.interval.ms": 5000},
                        "g", lambda: tuple(view), ManualClock())
    threading.Timer(0.05, lambda: view.__setitem__(1, 4)).start()
    assert c.commit_sync([TopicPartition("orders", 1, 42)], 5, retry_stale_epoch=True)
    assert coordinator.epochs[0] == 3 and coordinator.epochs[-1] == 4
