"""A deposed active controller never reports success for records a later leader overwrote: its
pending operation completes only when the entry at its index is the one it proposed (same term),
as Kafka's QuorumController fails a renounced controller's pending writes."""
from __future__ import annotations

import pytest

from broker.clock import ManualClock
from broker.config import BROKER_CONFIG
from broker.errors import NotControllerError
from broker.raft.messages import Entry
from broker.server.controller_runtime import ControllerRuntime, _Op

pytestmark = pytest.mark.unit


def _runtime(tmp_path) -> ControllerRuntime:
    config = BROKER_CONFIG.parse({"node.id": 1, "log.dirs": str(tmp_path), "process.roles": "broker,controller",
                                  "controller.quorum.voters": "1@127.0.0.1:1,2@127.0.0.1:2,3@127.0.0.1:3"})
    return ControllerRuntime(config, ManualClock(0), [1, 2, 3], lambda dst, message: None)


def _pending(rt: ControllerRuntime, index: int, term: int) -> _Op:
    op = _Op(None)
    op.index, op.term, op.result = index, term, {"start": 0, "end": 1000}
    rt._pending = op
    return op


def test_the_entry_this_controller_proposed_completes_its_operation(tmp_path):
    rt = _runtime(tmp_path)
    op = _pending(rt, 2, 1)
    rt._apply_entry(Entry(1, 2, b'{"records": [{"type": "producer_ids", "next": 1000}]}'))
    assert op.future.result(0) == {"start": 0, "end": 1000, "offset": 2}


def test_another_leaders_entry_at_the_same_index_fails_the_operation(tmp_path):
    rt = _runtime(tmp_path)
    op = _pending(rt, 2, 1)
    rt._apply_entry(Entry(2, 2, b""))                  # the next leader's no-op took index 2
    with pytest.raises(NotControllerError, match="leadership was lost"):
        op.future.result(0)
    assert rt._pending is None



def test_a_runtime_restarts_from_its_metadata_snapshot(tmp_path):
    """A node restarted with a metadata snapshot on disk loads it when its runtime is made."""
    _runtime(tmp_path).storage.save_snapshot(5, 1, b'{"records": [{"type": "producer_ids", "next": 2000}]}')
    again = _runtime(tmp_path)
    assert (again.applied, again.image.next_producer_id, again._pending) == (5, 2000, None)
