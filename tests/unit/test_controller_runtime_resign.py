"""Stopping the active controller resigns its Raft leadership first, so the other controllers elect
a successor at once (Kafka's graceful shutdown sends EndQuorumEpoch), instead of waiting out the
leader's lease and an election timeout. The runtime's real thread; its two peers are pure Raft nodes."""
from __future__ import annotations

import queue
import random

import pytest

from broker.clock import ManualClock
from broker.config import BROKER_CONFIG
from broker.raft import EndQuorumEpoch, MemoryRaftStorage, RaftNode, Role, VoteRequest, from_dict, to_dict
from broker.server.controller_runtime import ControllerRuntime
from tests.conftest import wait_until

pytestmark = pytest.mark.unit


def test_stopping_the_active_controller_resigns_and_a_follower_campaigns_at_once(tmp_path):
    config = BROKER_CONFIG.parse({"node.id": 1, "log.dirs": str(tmp_path), "process.roles": "broker,controller",
                                  "controller.quorum.voters": "1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3"})
    clock, sent = ManualClock(0), queue.Queue()
    runtime = ControllerRuntime(config, clock, [1, 2, 3], lambda dst, message: sent.put((dst, message)))
    peers = {i: RaftNode(i, [1, 2, 3], MemoryRaftStorage(), random.Random(i), 0) for i in (2, 3)}  # never ticked

    def pump() -> list:
        """Deliver what the runtime sent to the peers and their answers back; return what was sent."""
        seen = []
        while True:
            try:
                dst, message = sent.get_nowait()
            except queue.Empty:
                return seen
            seen.append((dst, from_dict(message)))
            for env in peers[dst].step(1, from_dict(message), clock.time_ms()):
                runtime.deliver(env.src, to_dict(env.message))

    runtime.start()
    try:
        def leading() -> bool:
            clock.advance(50)
            pump()
            return runtime.raft.state is Role.LEADER and all(p.leader_id == 1 for p in peers.values())
        wait_until(leading, 20, 0.02, "the runtime's node to lead with both peers following")
        term = runtime.raft.term
    finally:
        runtime.stop()
    notices = {dst: m for dst, m in pump() if isinstance(m, EndQuorumEpoch)}
    assert set(notices) == {2, 3} and all(m.term == term and m.leader_id == 1 for m in notices.values())
    assert runtime.raft.role == "follower" and runtime.raft.leader_id is None
    first = notices[2].preferred_successors[0]
    now = clock.time_ms()  # inside the lease the peers hold from the leader's last heartbeat
    assert all(p.leader_id is None for p in peers.values())
    campaign = peers[first].tick(now)
    assert campaign and all(isinstance(env.message, VoteRequest) and env.message.pre_vote for env in campaign)
