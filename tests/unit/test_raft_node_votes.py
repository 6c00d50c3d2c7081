"""The pure Raft node's vote rules, message by message, against Kafka's Raft
(``KafkaRaftClient.handleVoteRequest``, ``FollowerState``/``UnattachedState.canGrantVote``,
``QuorumState.initialize``) and the Raft paper: who may vote, for whom, and what survives a restart."""
from __future__ import annotations

import random

import pytest

from broker.errors import NotControllerError
from broker.raft import (AppendRequest, AppendResponse, Entry, MemoryRaftStorage, RaftNode, Role, SnapshotRequest,
                         VoteRequest, VoteResponse)

pytestmark = pytest.mark.unit

TIMEOUT = (1000, 2000)


def node(node_id: int = 1, voters=(1, 2, 3), storage=None, now_ms: int = 0) -> RaftNode:
    return RaftNode(node_id, list(voters), storage or MemoryRaftStorage(), random.Random(node_id), now_ms,
                    election_timeout_ms=TIMEOUT)


def replies(envelopes) -> list:
    return [env.message for env in envelopes]


def vote(term: int, candidate: int, last_index: int = -1, last_term: int = -1, pre_vote: bool = False):
    return VoteRequest(term, candidate, last_index, last_term, pre_vote=pre_vote)


# ------------------------------------------------------------------------------ known leader
def test_a_follower_that_knows_the_leader_of_the_term_refuses_a_vote_in_it():
    """Kafka's FollowerState.canGrantVote: "already have a leader in epoch": a voter that learned
    the epoch from its leader (so it has no vote of its own in it) refuses another candidate of
    that epoch, whatever the lease says."""
    follower = node(2)
    follower.step(1, AppendRequest(3, 1, -1, -1, (Entry(3, 0, b""),), -1), 0)
    assert follower.leader_id == 1 and follower.term == 3 and follower.voted_for is None
    late = TIMEOUT[1] * 5  # long after the leader was last heard from: no lease protects it
    [answer] = replies(follower.step(3, vote(3, 3, 0, 3), late))
    assert answer == VoteResponse(3, 2, False, False)
    assert follower.voted_for is None and follower.storage.hard_state() == (3, None)


def test_a_vote_in_a_later_term_is_still_granted_once_the_leader_is_gone():
    """Guard (already matched): the known leader only blocks votes in its own term."""
    follower = node(2)
    follower.step(1, AppendRequest(3, 1, -1, -1, (Entry(3, 0, b""),), -1), 0)
    [answer] = replies(follower.step(3, vote(4, 3, 0, 3), TIMEOUT[1] * 5))
    assert answer == VoteResponse(4, 2, True, False)
    assert follower.storage.hard_state() == (4, 3) and follower.leader_id is None


# ------------------------------------------------------------------------------ the voter set
@pytest.mark.parametrize("pre_vote", [False, True], ids=["vote", "pre-vote"])
def test_a_candidate_outside_the_voter_set_gets_no_vote_and_moves_no_term(pre_vote):
    """Kafka's validateVoterOnlyRequest: a candidate that is not one of the voters is refused
    (INCONSISTENT_VOTER_SET) before the request can change the voter's epoch. Otherwise two nodes
    configured with different voter sets could each gather "a majority" in the same term."""
    voter = node(1, voters=(1, 2, 3))
    [answer] = replies(voter.step(4, vote(5, 4, 10, 4, pre_vote), 0))
    assert answer.granted is False and answer.term == 0
    assert voter.term == 0 and voter.voted_for is None and voter.storage.hard_state() == (0, None)


@pytest.mark.parametrize("pre_vote", [False, True], ids=["vote", "pre-vote"])
def test_a_node_outside_the_voter_set_never_votes(pre_vote):
    """An observer (a node not among the voters) neither campaigns nor votes."""
    observer = node(4, voters=(1, 2, 3))
    [answer] = replies(observer.step(1, vote(5, 1, 10, 4, pre_vote), 0))
    assert answer.granted is False
    assert observer.voted_for is None and observer.storage.hard_state()[1] is None
    assert observer.tick(TIMEOUT[1] * 10) == [] and observer.state is Role.FOLLOWER


def test_a_voter_still_votes_for_a_fellow_voter():
    """Guard (already matched): the voter-set check refuses only outsiders."""
    voter = node(1, voters=(1, 2, 3))
    [answer] = replies(voter.step(2, vote(5, 2, 10, 4), 0))
    assert answer == VoteResponse(5, 1, True, False)
    assert voter.storage.hard_state() == (5, 2)


# ------------------------------------------------------------------------------ pre-vote
def test_a_pre_vote_changes_neither_term_nor_vote_on_either_side():
    """Guard (already matched): KIP-996's pre-vote costs the cluster nothing."""
    voter = node(1)
    [answer] = replies(voter.step(2, vote(1, 2, pre_vote=True), 0))
    assert answer == VoteResponse(1, 1, True, True)
    assert voter.storage.hard_state() == (0, None)
    prospective = node(2)
    out = prospective.tick(TIMEOUT[1])
    assert prospective.state is Role.PROSPECTIVE and prospective.storage.hard_state() == (0, None)
    assert {env.message for env in out} == {vote(1, 2, pre_vote=True)}


# ------------------------------------------------------------------------------ restart
def test_a_restart_whose_quorum_state_is_behind_its_log_adopts_the_log_term():
    """Kafka's QuorumState.initialize: when the stored epoch is below the log's last epoch, the node
    starts unattached in the log's epoch. Otherwise it could win an election in a term below entries
    it already holds, and append a no-op whose term goes backwards."""
    storage = MemoryRaftStorage()
    storage.append([Entry(1, 0, b""), Entry(4, 1, b"x")])  # quorum state (term 0) lost, log kept
    single = RaftNode(1, [1], storage, random.Random(1), 0, election_timeout_ms=TIMEOUT)
    assert single.term == 4 and single.voted_for is None and storage.hard_state() == (4, None)
    single.tick(0)
    assert single.role == "leader" and single.term == 5
    terms = [e.term for e in storage.entries(0, storage.last_index() + 1)]
    assert terms == sorted(terms) == [1, 4, 5]


def test_a_restart_whose_quorum_state_is_behind_its_snapshot_adopts_the_snapshot_term():
    storage = MemoryRaftStorage()
    storage.save_snapshot(7, 6, b"image")
    restarted = node(1, storage=storage)
    assert restarted.term == 6 and storage.hard_state() == (6, None)


def test_a_restart_keeps_term_and_vote():
    """Guard (already matched): a vote survives a restart, so a voter never votes twice in a term."""
    storage = MemoryRaftStorage()
    first = node(1, storage=storage)
    first.step(2, vote(3, 2), 0)
    again = node(1, storage=storage)
    assert (again.term, again.voted_for) == (3, 2)
    [answer] = replies(again.step(3, vote(3, 3), 0))
    assert answer.granted is False and storage.hard_state() == (3, 2)


# ------------------------------------------------------------------------------ snapshots
def test_a_snapshot_beyond_the_log_replaces_it_and_is_handed_over_once():
    """Guard (already matched): a follower far behind installs the leader's snapshot; entries of its
    own log that disagree with the snapshot's last entry are dropped."""
    follower = node(2)
    follower.step(1, AppendRequest(1, 1, -1, -1, (Entry(1, 0, b""), Entry(1, 1, b"stale")), -1), 0)
    [answer] = replies(follower.step(3, SnapshotRequest(2, 3, 5, 2, b"image"), 10))
    assert answer.last_index == 5 and follower.commit_index == 5 and follower.leader_id == 3
    assert follower.last_index == 5 and follower.storage.term_at(5) == 2
    assert follower.take_snapshot_to_apply() == (5, 2, b"image")
    assert follower.take_snapshot_to_apply() is None and follower.take_committed() == []


# ------------------------------------------------------------------------------ guards from Kafka's tests
def elect(leader: RaftNode, voter: RaftNode, now_ms: int = TIMEOUT[1]) -> None:
    """Drive ``leader`` through pre-vote and vote with the single other voter it needs (of three)."""
    [pre] = [env for env in leader.tick(now_ms) if env.dst == voter.node_id]
    for env in voter.step(leader.node_id, pre.message, now_ms):
        for request in leader.step(voter.node_id, env.message, now_ms):
            if request.dst == voter.node_id:
                for answer in voter.step(leader.node_id, request.message, now_ms):
                    leader.step(voter.node_id, answer.message, now_ms)
    assert leader.role == "leader"


def test_leader_and_candidate_refuse_votes_in_their_own_term():
    """Guard (already matched): testLeaderIgnoreVoteRequestOnSameEpoch,
    testCandidateIgnoreVoteRequestOnSameEpoch."""
    leader, voter = node(1), node(2)
    elect(leader, voter)
    [answer] = replies(leader.step(3, vote(leader.term, 3, 5, leader.term), TIMEOUT[1]))
    assert answer.granted is False and leader.voted_for == 1
    candidate = node(3)
    candidate.tick(TIMEOUT[1] * 3)
    candidate.step(1, VoteResponse(1, 1, True, True), TIMEOUT[1] * 3)  # pre-vote won: candidate in term 1
    assert candidate.state is Role.CANDIDATE
    [answer] = replies(candidate.step(2, vote(candidate.term, 2, 5, 1), TIMEOUT[1] * 3))
    assert answer.granted is False and candidate.voted_for == 3


def test_check_quorum_resigns_a_leader_that_hears_from_no_majority_but_never_a_single_voter():
    """Guard (already matched): testLeaderShouldResignLeadershipIfNotGetFetchRequestFromMajorityVoters,
    testLeaderShouldNotResignLeadershipIfOnlyOneVoters."""
    leader, voter = node(1), node(2)
    elect(leader, voter)
    start = TIMEOUT[1]
    leader.tick(start + TIMEOUT[0] - 1)
    assert leader.role == "leader"
    leader.tick(start + TIMEOUT[0])
    assert leader.role == "follower" and leader.leader_id is None and leader.term == 1
    with pytest.raises(NotControllerError, match="not the Raft leader"):
        leader.propose(b"x", start + TIMEOUT[0])
    single = node(1, voters=(1,))
    single.tick(0)
    single.tick(TIMEOUT[1] * 100)
    assert single.role == "leader" and single.term == 1


def test_an_entry_of_an_older_term_commits_only_with_one_of_the_leaders_term():
    """Guard (already matched): Raft Figure 8 / Kafka's LeaderState (the high watermark waits for the
    epoch start offset): a majority holding an old entry is not enough."""
    storage = MemoryRaftStorage()
    storage.save_hard_state(2, None)
    storage.append([Entry(1, 0, b""), Entry(2, 1, b"old")])
    leader, voter = node(1, storage=storage), node(2)
    voter.storage.append([Entry(1, 0, b""), Entry(2, 1, b"old")])
    voter.storage.save_hard_state(2, None)
    elect(leader, voter)
    noop = leader.last_index
    assert storage.term_at(noop) == leader.term == 3 and leader.commit_index == -1
    leader.step(2, AppendResponse(3, 2, True, 1, -1), TIMEOUT[1])  # the old entry on a majority
    assert leader.commit_index == -1
    leader.step(2, AppendResponse(3, 2, True, noop, -1), TIMEOUT[1])
    assert leader.commit_index == noop
    assert [e.data for e in leader.take_committed()] == [b"", b"old", b""]
