"""Transaction markers carry the coordinator epoch, and a partition refuses one from a deposed
coordinator (Kafka's ``ProducerAppendInfo.appendEndTxnMarker``/``checkCoordinatorEpoch``): the
producer state keeps the epoch of the producer's last marker, across producer-epoch bumps, in its
snapshot and when rebuilt from the log; followers take a marker's epoch as it is."""
from __future__ import annotations

import json
import os

import pytest

from broker.clock import ManualClock
from broker.config import TOPIC_CONFIG
from broker.errors import InvalidProducerEpochError, TransactionCoordinatorFencedError
from broker.partition import AppendNotifier, Partition
from broker.records.arrow_body import encode_batch, record_batch
from broker.records.batch import TRANSACTIONAL, parse_header
from broker.records.control import ABORT, COMMIT, marker_batch, marker_type, read_marker
from broker.storage.log import Log
from broker.storage.producer_state import SNAPSHOT_FILE, ProducerStateManager

pytestmark = pytest.mark.unit

PID = 1000


def _txn_batch(n: int = 3, sequence: int = 0, epoch: int = 0) -> bytes:
    return encode_batch(record_batch([b"k"] * n, [b"v"] * n, [1] * n), attributes=TRANSACTIONAL,
                        producer_id=PID, producer_epoch=epoch, base_sequence=sequence)


def _partition(path, replicas=(0,)) -> Partition:
    clock = ManualClock()
    log = Log.open(str(path), TOPIC_CONFIG.parse({}), clock)
    partition = Partition("t", 0, "id", log, AppendNotifier(), clock=clock)
    partition.make_leader(0, 0, list(replicas), list(replicas))
    return partition


def _stable_values(p: Partition) -> bytes:
    return bytes(p.read(0, 1 << 20, read_committed=True).records)


def test_a_marker_holds_its_type_and_coordinator_epoch():
    assert read_marker(marker_batch(PID, 3, True, 7, 1)) == (COMMIT, 7)
    assert read_marker(marker_batch(PID, 3, False, 0, 1)) == (ABORT, 0)
    assert marker_type(marker_batch(PID, 3, False, 9, 1)) == ABORT


def test_a_marker_from_an_older_coordinator_is_refused_and_the_open_transaction_stays_open(tmp_path):
    p = _partition(tmp_path)
    p.append_records(_txn_batch())                                   # 0-2
    p.write_marker(PID, 0, True, 5)                                  # 3: commit by coordinator epoch 5
    p.append_records(_txn_batch(sequence=3))                         # 4-6: the next transaction
    with pytest.raises(TransactionCoordinatorFencedError, match=r"3 \(zombie\), 5 \(current\)"):
        p.write_marker(PID, 0, True, 3)                              # a deposed coordinator's late commit
    assert p.log.log_end_offset == 7                                 # nothing written
    assert [t[2] for t in p.producers.open_transactions()] == [4]
    assert p.stable_offsets()[0] == 4                                # read_committed still stops before it
    p.write_marker(PID, 0, False, 5)                                 # the current coordinator may end it
    assert p.producers.open_transactions() == []
    assert [(a.first_offset, a.last_offset) for a in p.producers.aborted] == [(4, 7)]


def test_the_same_or_a_newer_coordinator_epoch_is_accepted(tmp_path):
    p = _partition(tmp_path)
    p.append_records(_txn_batch())
    p.write_marker(PID, 0, True, 2)
    p.write_marker(PID, 0, True, 2)                                  # a retry of the same coordinator
    p.write_marker(PID, 0, False, 4)
    assert p.producers.producers[PID].coordinator_epoch == 4


def test_an_older_producer_epoch_is_still_refused_first(tmp_path):
    p = _partition(tmp_path)
    p.append_records(_txn_batch(epoch=2))
    with pytest.raises(InvalidProducerEpochError):
        p.write_marker(PID, 1, True, 9)


def test_the_coordinator_epoch_survives_a_producer_epoch_bump():
    state = ProducerStateManager()
    state.end_transaction(parse_header(marker_batch(PID, 0, True, 6, 1)), 3, True, 6)
    state.update(parse_header(_txn_batch(epoch=1)), 4, 6)
    assert state.producers[PID].epoch == 1
    with pytest.raises(TransactionCoordinatorFencedError):
        state.check_marker(PID, 1, 5, 7, "t-0")
    state.check_marker(PID, 1, 6, 7, "t-0")


def test_the_coordinator_epoch_is_in_the_snapshot(tmp_path):
    p = _partition(tmp_path)
    p.append_records(_txn_batch())
    p.write_marker(PID, 0, True, 8)
    p.close()
    with open(os.path.join(tmp_path, SNAPSHOT_FILE)) as f:
        assert json.load(f)["producers"][str(PID)]["coordinator_epoch"] == 8
    again = _partition(tmp_path)
    assert again.producers.producers[PID].coordinator_epoch == 8
    again.append_records(_txn_batch(sequence=3))
    with pytest.raises(TransactionCoordinatorFencedError):
        again.write_marker(PID, 0, True, 7)


def test_the_coordinator_epoch_is_rebuilt_from_the_log_without_a_snapshot(tmp_path):
    p = _partition(tmp_path)
    p.append_records(_txn_batch())
    p.write_marker(PID, 0, True, 8)
    p.close()
    os.remove(os.path.join(tmp_path, SNAPSHOT_FILE))
    again = _partition(tmp_path)
    assert again.producers.producers[PID].coordinator_epoch == 8


def test_a_snapshot_without_coordinator_epochs_loads_as_none_known(tmp_path):
    p = _partition(tmp_path)
    p.append_records(_txn_batch())
    p.close()
    path = os.path.join(tmp_path, SNAPSHOT_FILE)
    with open(path) as f:
        doc = json.load(f)
    for entry in doc["producers"].values():
        entry.pop("coordinator_epoch", None)
    with open(path, "w") as f:
        json.dump(doc, f)
    again = _partition(tmp_path)
    assert again.producers.producers[PID].coordinator_epoch == -1
    again.write_marker(PID, 0, True, 0)


def test_a_follower_takes_the_markers_coordinator_epoch_as_it_is(tmp_path):
    """Kafka's ``checkCoordinatorEpoch`` only logs for ``AppendOrigin.REPLICATION``: the leader
    decided, so the follower applies the marker and its epoch."""
    leader = _partition(tmp_path / "leader", replicas=(0, 1))
    follower = Partition("t", 0, "id", Log.open(str(tmp_path / "follower"), TOPIC_CONFIG.parse({}), ManualClock()),
                         AppendNotifier(), clock=ManualClock())
    follower.make_follower(0, 0, 0, [0, 1], [0, 1])
    leader.append_records(_txn_batch())
    leader.write_marker(PID, 0, True, 4)
    while follower.log.log_end_offset < leader.log.log_end_offset:
        fetched = leader.read_for_follower(1, follower.log.log_end_offset, 1 << 20, 0)
        follower.append_as_follower(fetched.records, fetched.high_watermark, 0)
    assert follower.producers.producers[PID].coordinator_epoch == 4
    assert follower.producers.open_transactions() == []
    older = marker_batch(PID, 0, False, 2, 1)
    follower.producers.replay([(parse_header(older), lambda: older)])   # not refused: the leader decided
    assert follower.producers.producers[PID].coordinator_epoch == 2


# ---------------------------------------------------------------------------------- the coordinator
class _Broker:
    """What :class:`TransactionRuntime` uses of a broker: one node leading ``__transaction_state-0``
    (loaded at ``coordinator_epoch``) and the data partition ``t-0``."""

    def __init__(self, tmp_path, coordinator_epoch: int):
        from types import SimpleNamespace as NS

        from broker.config import BROKER_CONFIG
        self.node_id, self.clock = 0, ManualClock()
        self.config = BROKER_CONFIG.parse({"log.dirs": str(tmp_path)})
        self.data = _partition(tmp_path / "t-0")
        self.txn_state = Partition("__transaction_state", 0, "id", Log.open(
            str(tmp_path / "txn-0"), TOPIC_CONFIG.parse({"cleanup.policy": "compact"}), self.clock),
            AppendNotifier(), clock=self.clock)
        self.txn_state.make_leader(coordinator_epoch, coordinator_epoch, [0], [0])
        led = NS(num_partitions=1, partitions=[NS(leader=0)])
        self.image = NS(topics={"__transaction_state": led, "t": led})

    def partition(self, topic: str, index: int) -> Partition:
        return self.txn_state if topic == "__transaction_state" else self.data


def _coordinator(tmp_path, coordinator_epoch: int):
    import threading

    from broker.server.coordinator_runtime import _Loaded
    from broker.server.txn_runtime import TransactionRuntime
    broker = _Broker(tmp_path, coordinator_epoch)
    runtime = TransactionRuntime(broker, groups=None)
    loaded = _Loaded(runtime.new_shard(0), broker.txn_state, coordinator_epoch, threading.Lock())
    runtime._shards[0] = loaded
    return broker, runtime, loaded


def _open(runtime, loaded, broker, sequence: int) -> None:
    now = broker.clock.time_ms()
    if "app" not in loaded.shard.txns:
        loaded.shard.init_producer_id("app", 60_000, now, lambda: PID)
    loaded.shard.add_partitions("app", PID, 0, [("t", 0)], now)
    broker.data.append_records(_txn_batch(sequence=sequence))


def test_the_coordinator_writes_markers_with_its_partitions_leader_epoch(tmp_path):
    broker, runtime, loaded = _coordinator(tmp_path, coordinator_epoch=3)
    _open(runtime, loaded, broker, 0)
    runtime.end("app", PID, 0, True)
    assert broker.data.producers.producers[PID].coordinator_epoch == 3
    assert loaded.shard.txns["app"].state == "CompleteCommit"


def test_a_fenced_coordinator_stops_coordinating_and_answers_not_coordinator(tmp_path):
    """Kafka's ``TransactionMarkerRequestCompletionHandler``: on TRANSACTION_COORDINATOR_FENCED the
    coordinator cancels the transaction's markers; here it drops the shard, so clients find the
    coordinator again instead of retrying a commit this broker can never finish."""
    from broker.errors import NotCoordinatorError
    broker, runtime, loaded = _coordinator(tmp_path, coordinator_epoch=3)
    _open(runtime, loaded, broker, 0)
    broker.data.write_marker(PID, 0, True, 7)                      # a newer coordinator finished it
    end = broker.data.log.log_end_offset
    with pytest.raises(NotCoordinatorError):
        runtime.end("app", PID, 0, True)
    assert broker.data.log.log_end_offset == end
    assert not loaded.live and runtime.loaded_shards() == []


def test_a_group_refuses_a_deposed_coordinators_marker_and_remembers_the_epoch_across_a_reload():
    """The group side (Kafka: the ``__consumer_offsets`` partition's producer state checks the end
    marker's coordinator epoch): a zombie's COMMIT marker used to commit the offsets of the
    producer's *next* transaction before the producer decided."""
    from broker.group.coordinator import GroupShard
    from broker.group.group import Committed
    shard, log = GroupShard(0), []
    log += shard.commit_in_transaction("g", "", -1, PID, 0, {("t", 0): Committed(10)})
    log += shard.end_transaction("g", PID, 0, commit=True, coordinator_epoch=5)
    log += shard.commit_in_transaction("g", "", -1, PID, 0, {("t", 0): Committed(20)})
    with pytest.raises(TransactionCoordinatorFencedError, match="3 \\(zombie\\), 5 \\(current\\)"):
        shard.end_transaction("g", PID, 0, commit=True, coordinator_epoch=3)
    assert shard.committed("g", [("t", 0)])[("t", 0)].offset == 10
    assert shard.unstable("g", [("t", 0)]) == {("t", 0)}

    back = GroupShard(0)                       # the __consumer_offsets partition moved
    back.load(log, now_ms=0)
    with pytest.raises(TransactionCoordinatorFencedError):
        back.end_transaction("g", PID, 0, commit=True, coordinator_epoch=3)
    back.end_transaction("g", PID, 0, commit=True, coordinator_epoch=6)
    assert back.committed("g", [("t", 0)])[("t", 0)].offset == 20
