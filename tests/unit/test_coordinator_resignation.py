"""A coordinator answers nothing from a shard whose partition it no longer leads at the epoch it
loaded, even before its next sync drops the shard: as Kafka's coordinators resign on the metadata
change, a deposed coordinator must not confirm a retried EndTxn or serve offsets the new leader
may have moved past; the client is told to find the coordinator again."""
from __future__ import annotations

import pytest

from broker.errors import NotCoordinatorError
from tests.unit.test_group_coordinator_reads import _fetch, _runtime

pytestmark = pytest.mark.unit


def _replicated_commit(broker, runtime, offset: int) -> None:
    broker.offsets.make_leader(0, 1, [0], [0])        # alone in the ISR: its writes are replicated
    runtime._sync()
    runtime.run("g", lambda shard: (None, shard.commit("g", "", -1, {("t", 0): _committed(offset)})))


def _committed(offset: int):
    from broker.group.group import Committed
    return Committed(offset)


def test_a_deposed_coordinator_refuses_reads_before_its_next_sync(tmp_path):
    broker, runtime = _runtime(tmp_path)
    _replicated_commit(broker, runtime, 7)
    assert _fetch(runtime) == {("t", 0): 7}
    broker.offsets.make_follower(1, 1, 2, [0, 1], [0, 1])   # node 1 leads now (epoch 1)
    with pytest.raises(NotCoordinatorError, match="find the coordinator again"):
        _fetch(runtime)
    assert not runtime.loaded_shards()


def test_a_coordinator_leading_again_at_a_new_epoch_reloads_first(tmp_path):
    broker, runtime = _runtime(tmp_path)
    _replicated_commit(broker, runtime, 7)
    broker.offsets.make_leader(2, 3, [0], [0])       # led again, after another leader's epoch
    with pytest.raises(NotCoordinatorError):
        _fetch(runtime)
    runtime._sync()                                  # reloads from the log
    assert _fetch(runtime) == {("t", 0): 7}
