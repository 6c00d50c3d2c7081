"""A crash can leave the log start offset (fsynced by DeleteRecords) past the log end that recovery
finds (the tail it pointed into was never fsynced). Kafka's
``LogLoader.deleteSegmentsIfLogStartGreaterThanLogEnd`` then deletes every segment and restarts the
log empty at the log start offset, clearing the leader-epoch cache and the producer state: new
records must get offsets at or past the log start, where readers can reach them."""
from __future__ import annotations

import os

import pytest

from broker.clock import ManualClock
from broker.config import TOPIC_CONFIG
from broker.errors import UnknownProducerIdError
from broker.partition import AppendNotifier, Partition
from broker.records.arrow_body import encode_batch, record_batch
from broker.records.batch import iter_headers, stamp_producer
from broker.records.reader import decode_records
from broker.storage.leader_epoch_cache import EpochEntry, LeaderEpochCache
from broker.storage.log import Log
from broker.storage.producer_state import ProducerStateManager
from broker.storage.segment import segment_name

pytestmark = pytest.mark.unit

PID = 7


def _idempotent(seq: int) -> bytes:
    return stamp_producer(encode_batch(record_batch([b"k"] * 2, [b"old%d" % seq, b"old%d" % (seq + 1)],
                                                    [1000] * 2)), PID, 0, seq)


def _open(directory: str, clean_shutdown: bool) -> Partition:
    log = Log.open(directory, TOPIC_CONFIG.parse({}), ManualClock(), clean_shutdown=clean_shutdown)
    return Partition("t", 0, "id", log, AppendNotifier())


def _crash_with_start_past_end(directory: str) -> None:
    """Offsets 0-79 in a rolled (fsynced) segment, 80-99 unsynced in the active one, the log start
    moved to 90, then a crash that tears the active segment's first batch."""
    p = _open(directory, clean_shutdown=True)
    p.make_leader(0, 0, [0], [0])
    for seq in range(0, 80, 2):
        p.append_records(_idempotent(seq))
    p.log.roll()
    p.producers.snapshot(p.log.log_end_offset)
    p.make_leader(1, 1, [0], [0])
    for seq in range(80, 100, 2):
        p.append_records(_idempotent(seq))
    assert p.delete_records(90) == 90
    p.log.close_without_flush()
    path = os.path.join(directory, segment_name(80) + ".log")
    with open(path, "rb") as f:
        first_batch_at, first = next(iter_headers(f.read()))
    assert first.base_offset == 80
    os.truncate(path, first_batch_at + 10)


def _values(p: Partition, offset: int) -> list[tuple[int, bytes]]:
    data = p.read(offset, 1 << 20).records
    return [(b.base_offset + i, v) for b in decode_records(data, offset)
            for i, v in enumerate(b.records.column("value").to_pylist())]


def test_a_log_whose_end_is_recovered_below_its_start_restarts_empty_at_the_start(tmp_path):
    directory = str(tmp_path)
    _crash_with_start_past_end(directory)

    log = Log.open(directory, TOPIC_CONFIG.parse({}), ManualClock(), clean_shutdown=False)
    assert log.restarted_at_log_start
    # What the log's records told of leader epochs and producers is gone from disk with them.
    assert LeaderEpochCache.load(directory).entries() == []
    snapshot = ProducerStateManager(directory)
    assert snapshot.load() == 90 and snapshot.producers == {}
    p = Partition("t", 0, "id", log, AppendNotifier())
    assert (p.log.log_start_offset, p.log.log_end_offset) == (90, 90)
    assert sorted(n for n in os.listdir(directory) if n.endswith(".log")) == [segment_name(90) + ".log"]
    assert p.epochs.entries() == [] and p.active_producers() == []

    p.make_leader(2, 2, [0], [0])
    assert p.epochs.entries() == [EpochEntry(2, 90)]
    info = p.append_records(encode_batch(record_batch([None] * 3, [b"new0", b"new1", b"new2"], [2000] * 3)))
    assert (info.first_offset, info.last_offset) == (90, 92)
    assert _values(p, 90) == [(90, b"new0"), (91, b"new1"), (92, b"new2")]
    # The producer's old batches are gone: it is unknown here and must start over (a new epoch).
    with pytest.raises(UnknownProducerIdError):
        p.append_records(_idempotent(100))
    p.close()

    again = _open(directory, clean_shutdown=True)
    assert not again.log.restarted_at_log_start
    assert (again.log.log_start_offset, again.log.log_end_offset) == (90, 93)
    assert again.epochs.entries() == [EpochEntry(2, 90)] and again.active_producers() == []
    again.make_leader(3, 3, [0], [0])
    assert _values(again, 90) == [(90, b"new0"), (91, b"new1"), (92, b"new2")]
    again.close()
