"""A leader that resigns on purpose (graceful shutdown) hands leadership over at once: Kafka's
EndQuorumEpoch (KafkaRaftClientTest.testLeaderGracefulShutdown,
testEndQuorumStartsNewElectionImmediatelyIfFollowerUnattached), on the pure Raft node."""
from __future__ import annotations

import random
from collections import deque

import pytest

from broker.raft import EndQuorumEpoch, MemoryRaftStorage, RaftNode, Role, from_dict, to_dict

pytestmark = pytest.mark.unit

LOW, HIGH = 1000, 2000


def cluster(n: int = 3) -> dict[int, RaftNode]:
    voters = list(range(1, n + 1))
    return {i: RaftNode(i, voters, MemoryRaftStorage(), random.Random(i), 0, election_timeout_ms=(LOW, HIGH))
            for i in voters}


def deliver(nodes: dict[int, RaftNode], envelopes, now_ms: int, down=()) -> None:
    """Deliver every message (and the replies they cause) at ``now_ms``, through JSON, to live nodes."""
    queue = deque(envelopes)
    while queue:
        env = queue.popleft()
        if env.dst not in down:
            queue.extend(nodes[env.dst].step(env.src, from_dict(to_dict(env.message)), now_ms))


def settle(nodes, now_ms: int, down=()) -> None:
    for node_id, node in nodes.items():
        if node_id not in down:
            deliver(nodes, node.tick(now_ms), now_ms, down)


def leaders(nodes, down=()) -> list[int]:
    return [i for i, n in nodes.items() if n.role == "leader" and i not in down]


def elect(nodes) -> int:
    """Tick every 10 ms until a leader is elected; the time then."""
    now = 0
    while not leaders(nodes):
        now += 10
        settle(nodes, now)
    return now


def test_a_resigning_leader_is_succeeded_within_the_old_leaders_lease():
    nodes = cluster()
    now = elect(nodes)
    [old] = leaders(nodes)
    term = nodes[old].term
    _, out = nodes[old].propose(b"x", now)
    deliver(nodes, out, now)
    now += 10
    settle(nodes, now)  # every follower now heard from the leader: each holds its lease for LOW ms

    notices = nodes[old].resign(now)
    assert nodes[old].role == "follower" and nodes[old].leader_id is None and nodes[old].term == term
    assert {env.dst for env in notices} == set(nodes) - {old}
    assert all(isinstance(env.message, EndQuorumEpoch) and env.message.term == term for env in notices)
    deliver(nodes, notices, now)
    assert all(n.leader_id is None for n in nodes.values())

    down = {old}  # the resigned node shuts down
    deadline = now + LOW // 2  # well inside the lease the followers would otherwise wait out
    while not leaders(nodes, down) and now < deadline:
        now += 10
        settle(nodes, now, down)
    [new] = leaders(nodes, down)
    assert new != old and nodes[new].term == term + 1


def test_a_follower_ignores_a_resignation_from_a_node_that_is_not_its_leader():
    """Only the leader it follows ends its lease; a leader, or a stale notice, changes nothing."""
    nodes = cluster()
    now = elect(nodes)
    [leader] = leaders(nodes)
    other, third = sorted(set(nodes) - {leader})
    fake = EndQuorumEpoch(nodes[leader].term, other, (third,))
    assert nodes[third].step(other, fake, now) == [] and nodes[third].leader_id == leader
    assert nodes[leader].step(other, fake, now) == [] and nodes[leader].state is Role.LEADER
    stale = EndQuorumEpoch(nodes[leader].term - 1, leader, (third,))
    assert nodes[third].step(leader, stale, now) == [] and nodes[third].leader_id == leader


def test_resigning_is_a_no_op_on_a_non_leader_and_the_notice_survives_json():
    nodes = cluster()
    assert nodes[1].resign(0) == [] and nodes[1].role == "follower"
    notice = EndQuorumEpoch(7, 2, (3, 1))
    assert from_dict(to_dict(notice)) == notice
