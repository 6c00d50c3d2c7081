"""The cleaner keeps each producer's last sequence (Kafka's ``overrideLastOffset`` and
``RETAIN_EMPTY``): a replica that copies a cleaned log and replays it knows the producer as well
as the leader did, so the producer's next batch is accepted after a leadership change."""
from __future__ import annotations

import pytest

from broker.clock import ManualClock
from broker.records import arrow_body
from broker.records.batch import iter_headers, stamp_producer, validate_batches
from broker.records.control import marker_batch
from broker.records.reader import decode_records, next_fetch_offset
from broker.storage import cleaner
from broker.storage.producer_state import AbortedTxn, ProducerStateManager
from tests.unit._logkit import MAX_BATCH, open_log

pytestmark = pytest.mark.unit

DAY = 86_400_000
COMPACT = {"cleanup.policy": "compact", "segment.bytes": 1 << 20, "min.cleanable.dirty.ratio": 0.0,
           "delete.retention.ms": DAY}
PID, EPOCH = 42, 3


def produce(log, state, keys, seq, transactional=False, values=None):
    data = arrow_body.encode_batch(arrow_body.record_batch(list(keys), values or [b"v"] * len(keys),
                                                           [1000] * len(keys)))
    data = stamp_producer(data, PID, EPOCH, seq, transactional)
    headers = validate_batches(data, max_batch_bytes=MAX_BATCH)
    state.check(headers[0])
    info = log.append(data, headers)
    state.update(headers[0], info.first_offset, info.last_offset)
    return info


def plain(log, keys):
    data = arrow_body.encode_batch(arrow_body.record_batch(list(keys), [b"w"] * len(keys), [1000] * len(keys)))
    return log.append(data, validate_batches(data, max_batch_bytes=MAX_BATCH))


def replica_of(log, tmp_path):
    """A new replica copying ``log`` batch by batch as a follower does, and its replayed producer
    state (``Partition.append_as_follower``)."""
    copy = open_log(tmp_path / "replica", COMPACT, ManualClock())
    state = ProducerStateManager()
    offset = log.log_start_offset
    while True:
        data = log.read(offset, 1 << 20)
        if data is None:
            return copy, state
        data = bytes(data)
        headers = validate_batches(data, max_batch_bytes=1 << 31, replicated=True)
        copy.append_as_follower(data, headers)
        state.replay((h, lambda at=at, h=h: data[at:at + h.size]) for at, h in iter_headers(data))
        offset = next_fetch_offset(data)


def sequences(state):
    return {pid: (e.epoch, e.last_sequence) for pid, e in state.producers.items()}


def next_batch(seq, keys=(b"x",)):
    data = arrow_body.encode_batch(arrow_body.record_batch(list(keys), [b"v"] * len(keys), [1000] * len(keys)))
    return validate_batches(stamp_producer(data, PID, EPOCH, seq), max_batch_bytes=MAX_BATCH)[0]


def test_last_batch_losing_its_trailing_records_keeps_its_last_sequence(tmp_path):
    """testLogCleanerRetainsProducerLastSequence: records 1 and 2 of the producer's last batch are
    superseded by later plain records; the cleaned batch still ends at sequence 4."""
    log = open_log(tmp_path / "leader", COMPACT, ManualClock())
    state = ProducerStateManager()
    produce(log, state, [b"a", b"b"], 0)                 # offsets 0-1, sequences 0-1
    produce(log, state, [b"c", b"d", b"e"], 2)           # offsets 2-4, sequences 2-4
    plain(log, [b"d", b"e"])                             # supersede d and e
    log.roll()
    before = sequences(state)
    assert before == {PID: (EPOCH, 4)}
    assert cleaner.clean(log, log.log_end_offset, 10_000) is not None
    copy, replayed = replica_of(log, tmp_path)
    assert sequences(replayed) == before
    assert replayed.check(next_batch(5)) is None                       # the producer goes on
    assert copy.log_end_offset == log.log_end_offset
    rows = [(b.base_offset, b.records.num_rows, b.next_offset) for b in decode_records(bytes(log.read(0, 1 << 20)), 0)]
    assert rows[:2] == [(0, 2, 2), (2, 1, 5)]                          # c at 2, the batch still ends at 4


def test_last_batch_with_no_survivor_stays_as_an_empty_batch(tmp_path):
    """testCleanSegmentsRetainingLastEmptyBatch: every record of the producer's only batch is
    superseded; an empty batch keeps the producer id, epoch and last sequence."""
    log = open_log(tmp_path / "leader", COMPACT, ManualClock())
    state = ProducerStateManager()
    produce(log, state, [b"a", b"b", b"c"], 0)           # offsets 0-2
    plain(log, [b"a", b"b", b"c"])                       # offsets 3-5 supersede all of them
    log.roll()
    before = sequences(state)
    assert cleaner.clean(log, log.log_end_offset, 10_000) is not None
    headers = [h for _, h in iter_headers(bytes(log.read(0, 1 << 20)))]
    assert (headers[0].record_count, headers[0].base_offset, headers[0].last_offset) == (0, 0, 2)
    copy, replayed = replica_of(log, tmp_path)
    assert sequences(replayed) == before
    assert replayed.check(next_batch(3)) is None
    # Readers go past the empty batch and see the survivors only, on the leader and the copy.
    for source in (log, copy):
        batches = decode_records(bytes(source.read(0, 1 << 20)), 0)
        assert [(b.base_offset, b.records.num_rows) for b in batches] == [(0, 0), (3, 3)]
        assert batches[0].next_offset == 3


def test_aborted_last_batch_keeps_its_sequence(tmp_path):
    """testLogCleanerRetainsLastSequenceEvenIfTransactionAborted: the aborted records go, their
    sequence stays, in a batch that is not transactional (replayed, it opens no transaction)."""
    log = open_log(tmp_path / "leader", COMPACT, ManualClock())
    state = ProducerStateManager()
    produce(log, state, [b"a"], 0)
    txn = produce(log, state, [b"b", b"c"], 1, transactional=True)      # offsets 1-2
    marker = marker_batch(PID, EPOCH, False, 0, 1000)
    info = log.append(marker, validate_batches(marker, max_batch_bytes=MAX_BATCH))
    state.end_transaction(validate_batches(marker, max_batch_bytes=MAX_BATCH)[0], info.first_offset, commit=False)
    plain(log, [b"z"])
    log.roll()
    before = sequences(state)
    aborted = [AbortedTxn(PID, txn.first_offset, info.first_offset)]
    assert cleaner.clean(log, log.log_end_offset, 10_000, aborted=aborted) is not None
    _, replayed = replica_of(log, tmp_path)
    assert sequences(replayed) == before
    assert replayed.first_unstable_offset() is None
    assert replayed.check(next_batch(3)) is None


def test_second_clean_keeps_it_and_drops_it_once_the_producer_wrote_on(tmp_path):
    """A clean of a cleaned log keeps the empty batch while it is the producer's last; once a later
    batch of the producer is cleaned with it, the empty one goes (its offsets stay a gap)."""
    log = open_log(tmp_path / "leader", COMPACT, ManualClock())
    state = ProducerStateManager()
    produce(log, state, [b"a", b"b"], 0)
    plain(log, [b"a", b"b"])
    log.roll()
    cleaner.clean(log, log.log_end_offset, 10_000)
    plain(log, [b"q"])
    log.roll()
    assert cleaner.clean(log, log.log_end_offset, 20_000) is not None
    first = next(iter_headers(bytes(log.read(0, 1 << 20))))[1]
    assert (first.record_count, first.producer_id, first.last_offset) == (0, PID, 1)
    produce(log, state, [b"c"], 2)
    plain(log, [b"c"])
    log.roll()
    assert cleaner.clean(log, log.log_end_offset, 30_000) is not None
    headers = [h for _, h in iter_headers(bytes(log.read(0, 1 << 20)))]
    assert [h.base_offset for h in headers if h.producer_id == PID] == [5]   # the newest only
    _, replayed = replica_of(log, tmp_path)
    assert sequences(replayed) == sequences(state) == {PID: (EPOCH, 2)}


def test_expired_producer_keeps_no_empty_batch(tmp_path):
    """With the partition's producer state (``producers``), only producers it still knows keep
    their last batch (Kafka: ``isBatchLastRecordOfProducer`` of an active producer)."""
    log = open_log(tmp_path / "leader", COMPACT, ManualClock())
    state = ProducerStateManager()
    produce(log, state, [b"a"], 0)
    plain(log, [b"a"])
    log.roll()
    assert cleaner.clean(log, log.log_end_offset, 10_000, producers={}) is not None
    headers = [h for _, h in iter_headers(bytes(log.read(0, 1 << 20)))]
    assert [h.producer_id for h in headers] == [-1]


def test_recovery_and_reopen_keep_the_log_end_and_reads(tmp_path):
    """A log whose last batches reach past their records (or hold none) recovers to the same end
    and indexes; reads from an offset inside such a batch move on past it."""
    clock = ManualClock()
    log = open_log(tmp_path / "leader", COMPACT, clock)
    state = ProducerStateManager()
    produce(log, state, [b"a", b"b", b"c"], 0)          # the producer's last batch
    plain(log, [b"b", b"c"])
    log.roll()
    cleaner.clean(log, log.log_end_offset, 10_000)
    end = log.log_end_offset
    log.flush()
    log.close_without_flush()
    reopened = open_log(tmp_path / "leader", COMPACT, clock, clean_shutdown=False)
    assert reopened.log_end_offset == end
    data = bytes(reopened.read(1, 1 << 20))
    batches = decode_records(data, 1)
    assert batches[0].records.num_rows == 0 and batches[0].next_offset == 3   # a at 0, b and c superseded
    assert [(b.base_offset, b.records.to_pydict()["key"]) for b in batches if b.records.num_rows][0] == (3, [b"b", b"c"])


def test_lookup_by_time_skips_an_emptied_batch(tmp_path):
    """On a LogAppendTime topic, an emptied batch keeps its append time; a lookup by time answers
    with the first record there is, never with the emptied batch's offsets."""
    clock = ManualClock()
    log = open_log(tmp_path / "leader", {**COMPACT, "message.timestamp.type": "LogAppendTime"}, clock)
    state = ProducerStateManager()
    produce(log, state, [b"a", b"b"], 0)                 # offsets 0-1
    clock.advance(10)
    plain(log, [b"a", b"b"])                             # offsets 2-3
    log.roll()
    cleaner.clean(log, log.log_end_offset, clock.time_ms())
    assert next(iter_headers(bytes(log.read(0, 1 << 20))))[1].record_count == 0
    assert log.offset_for_timestamp(0) == (2, clock.time_ms())


def test_only_replication_accepts_batches_with_fewer_records_than_offsets(tmp_path):
    """A produce must still send one record per offset (Kafka's LogValidator: InvalidRecord); a
    follower copies the cleaner's shapes as they are."""
    from broker.errors import InvalidRecordError
    log = open_log(tmp_path / "leader", COMPACT, ManualClock())
    state = ProducerStateManager()
    produce(log, state, [b"a", b"b", b"c"], 0)
    plain(log, [b"b", b"c"])
    log.roll()
    cleaner.clean(log, log.log_end_offset, 10_000)
    data = bytes(log.read(0, 1 << 20))
    shapes = [(h.record_count, h.last_offset_delta) for h in validate_batches(data, max_batch_bytes=MAX_BATCH,
                                                                              replicated=True)]
    assert shapes == [(1, 2), (2, 1)]
    with pytest.raises(InvalidRecordError):
        validate_batches(data, max_batch_bytes=MAX_BATCH)
