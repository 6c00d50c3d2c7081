"""The replica fetcher against the metadata thread moving a follower on while a fetch is being built
or answered (Kafka's ``AbstractFetcherThread``: a partition is fetched only in the epoch its fetch
state was truncated for, and only the replica manager removes a partition from a fetcher), and
against one partition failing (its errors are its own, as Kafka's ``partitionsWithError``). Each
test forces one interleaving by calling the pieces in that order."""
from __future__ import annotations

import pytest

from broker.clock import ManualClock
from broker.config import BROKER_CONFIG, TOPIC_CONFIG
from broker.errors import RiverlogError
from broker.partition import AppendNotifier, Partition
from broker.proto import riverlog_pb2 as pb
from broker.records import arrow_body
from broker.server.replica_fetcher import ReplicaFetcher, ReplicaFetcherManager
from broker.storage.log import Log

pytestmark = pytest.mark.unit


def partition(directory, node_id: int, cls=Partition) -> Partition:
    clock = ManualClock()
    return cls("t", 0, "id", Log.open(str(directory), TOPIC_CONFIG.parse({}), clock),
               AppendNotifier(), node_id=node_id, clock=clock)


def append(p: Partition, *values: bytes) -> None:
    for v in values:
        p.append_records(arrow_body.encode_batch(arrow_body.record_batch([None], [v], [1])))


class Leader:
    """Broker 1's answers, from its real log: Fetch (``meanwhile`` runs while the answer is on its
    way) and OffsetsForLeaderEpoch."""

    def __init__(self, log: Partition, meanwhile=lambda: None):
        self.log, self.meanwhile = log, meanwhile

    def public(self, address):
        return self

    def call(self, address, method, body, timeout):
        ask = body["partitions"][0]
        epoch, end = self.log.end_offset_for_epoch(ask["leader_epoch"], ask["current_leader_epoch"])
        return {"partitions": [{"leader_epoch": epoch, "end_offset": end}]}

    def Fetch(self, request, timeout):  # noqa: N802 - the gRPC stub's name
        response = pb.FetchResponse()
        for topic in request.topics:
            for ask in topic.partitions:
                answer = response.topics.add(name=topic.name).partitions.add(partition=ask.partition)
                try:
                    got = self.log.read_for_follower(request.replica_id, ask.fetch_offset, ask.max_bytes,
                                                     ask.current_leader_epoch)
                    answer.records, answer.high_watermark = bytes(got.records), got.high_watermark
                    answer.log_start_offset, answer.log_end_offset = got.log_start_offset, got.log_end_offset
                except RiverlogError as e:
                    answer.error_code = e.code
        self.meanwhile()
        return response


def fetcher_for(leader: Leader) -> tuple[ReplicaFetcherManager, ReplicaFetcher]:
    manager = ReplicaFetcherManager(2, BROKER_CONFIG.parse({}), leader, lambda node: "leader:1",
                                    broker_epoch=lambda: 1)
    fetcher = ReplicaFetcher(manager, 1)
    manager._threads[1] = fetcher   # the manager's thread for leader 1 (not started: driven by hand)
    return manager, fetcher


def diverged_cluster(tmp_path):
    """Broker 2 follows broker 1 in epoch 5 and holds offsets 0-2. Broker 1 comes back for epoch 7
    having kept only offset 0 of epoch 5, and writes two records of epoch 7 at offsets 1-2 and one
    at 3: broker 2 must cut to 1 before it fetches in epoch 7."""
    before = partition(tmp_path / "b1-before", 1)
    before.make_leader(5, 1, [1, 2], [1, 2])
    append(before, b"a", b"b", b"c")
    follower = partition(tmp_path / "b2", 2)
    follower.make_follower(1, 5, 1, [1, 2], [1, 2])
    manager, fetcher = fetcher_for(Leader(before))
    manager.add(follower, 1)
    fetcher._truncate("leader:1", [follower])
    fetcher._fetch("leader:1", [follower])
    assert follower.offsets()[2] == 3
    after = partition(tmp_path / "b1-after", 1)
    after.make_leader(5, 1, [1, 2], [1, 2])
    append(after, b"a")
    after.make_follower(2, 6, 2, [1, 2], [2])
    after.make_leader(7, 3, [1, 2], [1])
    append(after, b"x", b"y", b"z")
    manager.peers = fetcher.m.peers = Leader(after)
    fetcher._stub = (None, None)
    return follower, manager, fetcher


def test_a_fetch_built_after_the_epoch_moved_but_before_the_partition_was_flagged_is_not_sent(tmp_path):
    follower, manager, fetcher = diverged_cluster(tmp_path)
    follower.make_follower(1, 7, 3, [1, 2], [1])      # the metadata thread, before fetchers.remove/add
    fetcher._fetch("leader:1", [follower])            # the list the fetcher took before the change
    assert follower.offsets()[2] == 3                 # nothing of epoch 7 appended over the epoch-5 tail
    assert id(follower) in fetcher._needs_truncation
    fetcher._truncate("leader:1", [follower])
    fetcher._fetch("leader:1", [follower])
    assert follower.offsets()[2] == 4
    assert [(e.epoch, e.start_offset) for e in follower.epochs.entries()] == [(5, 0), (7, 1)]


def test_a_partition_removed_and_not_yet_added_again_is_not_fetched(tmp_path):
    follower, manager, fetcher = diverged_cluster(tmp_path)
    follower.make_follower(1, 7, 3, [1, 2], [1])
    manager.remove(follower)                          # ... and add() not yet
    fetcher._fetch("leader:1", [follower])
    assert follower.offsets()[2] == 3


class Refollowing(Partition):
    """Between the fetcher's failed append and what it does next, the metadata thread makes this
    replica follow broker 1 again and hands it back to the same fetcher."""

    again = None

    def append_as_follower(self, *args, **kwargs):
        try:
            return super().append_as_follower(*args, **kwargs)
        except RiverlogError:
            if self.again is not None:
                self.again()
            raise


def test_a_partition_handed_back_while_its_fetch_failed_stays_in_the_fetcher(tmp_path):
    leader = partition(tmp_path / "b1", 1)
    leader.make_leader(5, 1, [1, 2], [1, 2])
    append(leader, b"a")
    follower = partition(tmp_path / "b2", 2, Refollowing)
    follower.make_follower(1, 5, 1, [1, 2], [1, 2])
    manager, fetcher = fetcher_for(Leader(leader))
    manager.add(follower, 1)
    fetcher._truncate("leader:1", [follower])

    def elected_here():   # broker 2 leads epoch 6 while the fetch is out
        manager.remove(follower)
        follower.make_leader(6, 2, [1, 2], [2])

    def follows_broker_1_again():
        follower.again = None
        follower.make_follower(1, 7, 3, [1, 2], [1, 2])
        manager.remove(follower)
        manager.add(follower, 1)

    manager.peers.meanwhile = elected_here
    follower.again = follows_broker_1_again
    fetcher._fetch("leader:1", [follower])
    assert id(follower) in fetcher._partitions         # still fetched: it follows broker 1 again
    assert id(follower) in fetcher._needs_truncation


class OneFailing(Leader):
    """Broker 1 answers OffsetsForLeaderEpoch for partition 1 from its log and fails partition 0
    with a storage error (its log directory is offline there)."""

    def call(self, address, method, body, timeout):
        if body["partitions"][0]["partition"] == 0:
            return {"partitions": [{"error_code": 56, "error_message": "log directory offline"}]}
        return super().call(address, method, body, timeout)


def followers(tmp_path, cls=Partition) -> tuple[Partition, Partition, Partition]:
    leader = partition(tmp_path / "b1", 1)
    leader.make_leader(5, 1, [1, 2], [1, 2])
    append(leader, b"a", b"b")
    made = []
    for index in (0, 1):
        clock = ManualClock()
        p = (cls if index == 0 else Partition)("t", index, "id", Log.open(str(tmp_path / f"b2-{index}"),
                                                                          TOPIC_CONFIG.parse({}), clock),
                                                AppendNotifier(), node_id=2, clock=clock)
        p.make_leader(4, 0, [1, 2], [2])       # it led epoch 4 once: its divergence check asks the leader
        append(p, b"a")
        p.make_follower(1, 5, 1, [1, 2], [1, 2])
        made.append(p)
    return leader, made[0], made[1]


def test_one_partition_failing_its_divergence_check_does_not_hold_up_the_others(tmp_path):
    leader, first, second = followers(tmp_path)
    manager, fetcher = fetcher_for(OneFailing(leader))
    manager.add(first, 1)
    manager.add(second, 1)
    fetcher._truncate("leader:1", [first, second])
    assert id(first) in fetcher._needs_truncation         # asked again later
    assert id(second) not in fetcher._needs_truncation    # checked: fetched from now on
    fetcher._fetch("leader:1", [second])
    assert second.offsets()[2] == 2
    asked = []
    fetcher.m.peers.call = lambda *a, **k: asked.append(a)   # within replica.fetch.backoff.ms
    fetcher._truncate("leader:1", [first])
    assert asked == []                                     # the failed one is not asked again at once


class BrokenDisk(Partition):
    def append_as_follower(self, *args, **kwargs):
        raise OSError(5, "Input/output error")


def test_one_partition_failing_its_append_does_not_drop_the_others_batches(tmp_path):
    leader, first, second = followers(tmp_path, BrokenDisk)
    manager, fetcher = fetcher_for(Leader(leader))
    manager.add(first, 1)
    manager.add(second, 1)
    fetcher._truncate("leader:1", [first, second])
    fetcher._fetch("leader:1", [first, second])
    assert second.offsets()[2] == 2                        # appended, though the first one failed
    assert id(first) in fetcher._needs_truncation
