"""A fetch answered by the old leader but processed after this follower moved to the new leader
(and truncated for it) must not be appended: Kafka's ``AbstractFetcherThread.processFetchResponse``
processes a response only while the partition is still fetched at the offset and epoch asked.
Otherwise the old leader's unreplicated tail sits where the new leader writes other records."""
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


def partition(directory, node_id: int) -> Partition:
    clock = ManualClock()
    return Partition("t", 0, "id", Log.open(str(directory), TOPIC_CONFIG.parse({}), clock),
                     AppendNotifier(), node_id=node_id, clock=clock)


class Leader:
    """Broker 1 answering the follower's fetch from its real log; ``meanwhile`` runs while the
    answer is on its way (what the follower's metadata thread and another fetcher may do)."""

    def __init__(self, log: Partition, meanwhile):
        self.log, self.meanwhile = log, meanwhile

    def Fetch(self, request, timeout):  # noqa: N802 - the gRPC stub's name
        ask = request.topics[0].partitions[0]
        response = pb.FetchResponse()
        answer = response.topics.add(name="t").partitions.add(partition=0)
        try:
            got = self.log.read_for_follower(request.replica_id, ask.fetch_offset, ask.max_bytes,
                                             ask.current_leader_epoch)
            answer.records, answer.high_watermark = bytes(got.records), got.high_watermark
            answer.log_start_offset, answer.log_end_offset = got.log_start_offset, got.log_end_offset
        except RiverlogError as e:
            answer.error_code, answer.log_start_offset = e.code, e.details.get("log_start_offset", -1)
        self.meanwhile()
        return response


class Peers:
    def __init__(self, stub):
        self.stub = stub

    def public(self, address):
        return self.stub


def fetch_once(follower: Partition, leader: Leader) -> None:
    manager = ReplicaFetcherManager(2, BROKER_CONFIG.parse({}), Peers(leader), lambda node: "leader:1",
                                    broker_epoch=lambda: 1)
    ReplicaFetcher(manager, 1)._fetch("leader:1", [follower])


def test_an_answer_from_before_a_leader_change_is_not_appended(tmp_path):
    old_leader = partition(tmp_path / "b1", 1)
    old_leader.make_leader(5, 1, [1, 2, 3], [1, 2, 3])
    old_leader.append_records(arrow_body.encode_batch(arrow_body.record_batch([None] * 2, [b"x", b"y"], [1, 2])))
    follower = partition(tmp_path / "b2", 2)
    follower.make_follower(1, 5, 1, [1, 2, 3], [1, 2, 3])

    def new_leader_elected():
        # Broker 3 leads epoch 6 from offset 0 (it never got the old leader's batch); the follower
        # learns it and truncates to where epoch 5 ends on broker 3: offset 0.
        follower.make_follower(3, 6, 2, [1, 2, 3], [2, 3])
        follower.truncate_to(0)

    fetch_once(follower, Leader(old_leader, new_leader_elected))
    assert follower.offsets() == (0, 0, 0)       # the old leader's tail stayed out
    assert follower.epochs.entries() == []


def test_an_answer_in_the_current_epoch_at_the_log_end_is_appended(tmp_path):
    leader = partition(tmp_path / "b1", 1)
    leader.make_leader(5, 1, [1, 2], [1, 2])
    leader.append_records(arrow_body.encode_batch(arrow_body.record_batch([None] * 2, [b"x", b"y"], [1, 2])))
    follower = partition(tmp_path / "b2", 2)
    follower.make_follower(1, 5, 1, [1, 2], [1, 2])
    fetch_once(follower, Leader(leader, lambda: None))
    assert follower.offsets()[2] == 2
    assert [(e.epoch, e.start_offset) for e in follower.epochs.entries()] == [(5, 0)]


def test_an_out_of_range_answer_from_before_a_leader_change_does_not_empty_the_log(tmp_path):
    # The old leader's log starts at 2 (DeleteRecords), past the follower's end; but by the time
    # its answer is read the follower follows broker 3, whose log still starts at 0.
    old_leader = partition(tmp_path / "b1", 1)
    old_leader.make_leader(5, 1, [1, 2, 3], [1])
    old_leader.append_records(arrow_body.encode_batch(arrow_body.record_batch([None], [b"x"], [1])))
    old_leader.append_records(arrow_body.encode_batch(arrow_body.record_batch([None], [b"y"], [2])))
    assert old_leader.delete_records(2) == 2
    follower = partition(tmp_path / "b2", 2)
    follower.make_follower(1, 5, 1, [1, 2, 3], [1])
    fetch_once(follower, Leader(old_leader, lambda: follower.make_follower(3, 6, 2, [1, 2, 3], [3])))
    assert follower.offsets() == (0, 0, 0)       # not restarted at the old leader's log start


class EpochAnswers(Peers):
    """OffsetsForLeaderEpoch answers; ``meanwhile`` runs while the first one is on its way."""

    def __init__(self, stub, answer: tuple[int, int], meanwhile):
        super().__init__(stub)
        self.answer, self.meanwhile, self.asked = answer, meanwhile, []

    def call(self, address, method, body, timeout):
        self.asked.append(body["partitions"][0]["current_leader_epoch"])
        if len(self.asked) == 1:
            self.meanwhile()
        return {"partitions": [{"leader_epoch": self.answer[0], "end_offset": self.answer[1]}]}


def test_a_truncation_answer_for_an_epoch_left_meanwhile_is_not_applied(tmp_path):
    # AbstractFetcherThreadTest.testLeaderEpochChangeDuringSuccessfulFetchEpochsFromLeader: the
    # follower's epoch changes while its OffsetsForLeaderEpoch question is out; the answer is
    # dropped and the question asked again in the new epoch.
    leader = partition(tmp_path / "b1", 1)
    leader.make_leader(5, 1, [1, 2], [1])
    for value in (b"a", b"b", b"c"):
        leader.append_records(arrow_body.encode_batch(arrow_body.record_batch([None], [value], [1])))
    follower = partition(tmp_path / "b2", 2)
    follower.make_follower(1, 5, 1, [1, 2], [1])
    fetch_once(follower, Leader(leader, lambda: None))
    assert follower.offsets()[2] == 3

    follower.make_follower(1, 6, 2, [1, 2], [1])
    peers = EpochAnswers(None, (5, 1), lambda: None)
    fetcher = ReplicaFetcher(ReplicaFetcherManager(2, BROKER_CONFIG.parse({}), peers, lambda node: "leader:1",
                                                   broker_epoch=lambda: 1), 1)

    def epoch_moves_on():   # what the metadata thread does: new epoch, re-added for truncation
        follower.make_follower(1, 7, 3, [1, 2], [1])
        fetcher.remove(follower)
        fetcher.add(follower)

    peers.meanwhile = epoch_moves_on
    fetcher.add(follower)
    fetcher._truncate("leader:1", [follower])
    assert follower.offsets()[2] == 3                      # the epoch-6 answer was not applied
    assert id(follower) in fetcher._needs_truncation       # asked again, in epoch 7
    fetcher._truncate("leader:1", [follower])
    assert peers.asked == [6, 7] and follower.offsets()[2] == 1
    assert id(follower) not in fetcher._needs_truncation
