"""The broker's ISR thread against an AlterPartition call that fails with an unexpected error: the
change in flight is dropped (so the next check proposes it again) and the thread keeps running.
Left in flight, the leader would never propose an ISR change for the partition again, and its high
watermark would keep waiting for the replica it was adding."""
from __future__ import annotations

import threading

import pytest

from broker.clock import ManualClock
from broker.config import BROKER_CONFIG, TOPIC_CONFIG
from broker.partition import AppendNotifier, Partition
from broker.records import arrow_body
from broker.server.broker import Broker
from broker.storage.log import Log

pytestmark = pytest.mark.unit


class BrokenController:
    """A controller call that fails with an error that is no RiverlogError (a bug, an encoding
    problem); ``calls`` is set on every call."""

    def __init__(self):
        self.calls = threading.Event()

    def call(self, method, body, timeout=10.0):
        self.calls.set()
        raise RuntimeError("unexpected")


def expanding_leader(tmp_path) -> tuple[Partition, tuple]:
    clock = ManualClock()
    p = Partition("t", 0, "id", Log.open(str(tmp_path / "p"), TOPIC_CONFIG.parse({}), clock), AppendNotifier(),
                  node_id=1, clock=clock)
    p.make_leader(3, 1, [1, 2], [1])
    p.append_records(arrow_body.encode_batch(arrow_body.record_batch([None], [b"v"], [1])))
    p.read_for_follower(2, 1, 1 << 20, 3)          # broker 2 caught up: it may join
    proposal = p.propose_isr_change(clock.time_ms(), 10_000)
    assert proposal is not None and proposal[0] == [1, 2]
    assert p.leader_state.pending_isr == (1, 2)
    return p, proposal


def broker(tmp_path) -> Broker:
    b = Broker(BROKER_CONFIG.parse({"node.id": 1, "log.dirs": str(tmp_path / "data")}))
    b.controller = BrokenController()
    return b


def test_a_failed_isr_change_is_dropped_so_it_can_be_proposed_again(tmp_path):
    p, proposal = expanding_leader(tmp_path)
    b = broker(tmp_path)
    b._send_isr(p, *proposal)
    assert p.leader_state.pending_isr is None
    assert p.propose_isr_change(p.clock.time_ms(), 10_000) is not None


def test_the_isr_thread_outlives_a_failed_isr_change(tmp_path):
    p, proposal = expanding_leader(tmp_path)
    b = broker(tmp_path)
    b.replicas.check_isr = lambda only=None: None   # nothing hosted: only the queued change runs
    b._alter_isr(p, *proposal)
    thread = threading.Thread(target=b._run_isr_updates, daemon=True)
    thread.start()
    try:
        assert b.controller.calls.wait(10)
        b.controller.calls.clear()
        b._alter_isr(p, *proposal)                  # a second change: the thread still serves it
        assert b.controller.calls.wait(10)
        assert thread.is_alive()
    finally:
        b._stopped.set()
        with b._isr_cond:
            b._isr_cond.notify_all()
        thread.join(10)
