"""The active controller's upkeep (fencing silent brokers, moving their leaderships) takes its turn
among queued operations in arrival order, as Kafka's controller queues its periodic checks among
requests: a steady stream of operations must not hold back fencing a dead broker, and a heartbeat
still waiting in the queue counts as heard. One voter, stepped by hand, so each proposal commits at once."""
from __future__ import annotations

import pytest

from broker.clock import ManualClock
from broker.config import BROKER_CONFIG
from broker.controller.operations import operation
from broker.server.controller_runtime import ControllerRuntime

pytestmark = pytest.mark.unit

SESSION = 1000


class Stepper:
    def __init__(self, tmp_path):
        config = BROKER_CONFIG.parse({"node.id": 1, "log.dirs": str(tmp_path), "process.roles": "broker,controller",
                                      "controller.quorum.voters": "1@127.0.0.1:1",
                                      "broker.session.timeout.ms": SESSION})
        self.clock = ManualClock(0)
        self.rt = ControllerRuntime(config, self.clock, [1], lambda dst, message: None)
        self.epochs: dict[int, int] = {}
        for _ in range(3):
            self.step()
        assert self.rt.is_active

    def step(self) -> None:
        """One turn of the controller thread's loop (``ControllerRuntime._run``)."""
        now = self.clock.time_ms()
        while not self.rt._inbox.empty():
            self.rt._handle(self.rt._inbox.get_nowait(), now)
        self.rt._emit(self.rt.raft.tick(now))
        self.rt._apply_committed()
        self.rt._maybe_run_ops(now)

    def submit(self, name, body):
        return self.rt.submit(operation(name, body))

    def call(self, name, body):
        future = self.submit(name, body)
        for _ in range(20):
            self.step()
            if future.done():
                return future.result(0)
        raise AssertionError(f"{name} was not answered")

    def heartbeat_body(self, b):
        return {"node_id": b, "broker_epoch": self.epochs[b], "metadata_offset": self.rt.applied}

    def start_cluster(self):
        for b in (1, 2):
            self.epochs[b] = self.call("register_broker", {"node_id": b, "host": "127.0.0.1", "port": 9000 + b,
                                                           "incarnation": f"inc-{b}"})["broker_epoch"]
        for b in (1, 2):
            assert not self.call("heartbeat", self.heartbeat_body(b))["fenced"]
        self.call("create_topic", {"name": "t", "num_partitions": 2, "replication_factor": 2})


def test_a_stream_of_operations_does_not_hold_back_fencing_a_silent_broker(tmp_path):
    s = Stepper(tmp_path)
    s.start_cluster()
    assert {p.leader for p in s.rt.image.topics["t"].partitions} == {1, 2}
    for _ in range(100):   # broker 2 is gone; broker 1 and clients keep the controller busy
        s.submit("heartbeat", s.heartbeat_body(1))
        s.submit("allocate_producer_ids", {})
        s.step()
        s.clock.advance(SESSION // 20)
    assert s.rt.image.brokers[2].fenced, "a broker silent for 5 sessions is still unfenced"
    assert not s.rt.image.brokers[1].fenced
    assert all(p.leader == 1 and p.isr == [1] for p in s.rt.image.topics["t"].partitions)


def test_a_heartbeat_waiting_behind_the_upkeeps_turn_counts_as_heard(tmp_path):
    """Guard for the turns above: the upkeep may run before a queued heartbeat; its arrival keeps
    the broker alive."""
    s = Stepper(tmp_path)
    s.start_cluster()
    s.call("heartbeat", s.heartbeat_body(2))
    s.clock.advance(SESSION - 100)
    s.call("heartbeat", s.heartbeat_body(1))
    s.submit("allocate_producer_ids", {})
    s.step()                                   # the upkeep's turn, then the allocation is proposed
    s.submit("allocate_producer_ids", {})
    s.submit("heartbeat", s.heartbeat_body(2))  # arrives while the allocation is pending
    s.clock.advance(200)                       # 1100 ms since broker 2's last heartbeat was run
    for _ in range(4):                         # the upkeep's turn comes before the heartbeat runs
        s.step()
    fences = [r for _, records in s.rt.history for r in records
              if r["type"] == "broker_state" and r.get("fenced") is True]
    assert fences == [], "a broker whose heartbeat waited in the queue was fenced"
    assert s.rt.image.next_producer_id == 2000   # both allocations ran
