"""The consumer's fetch path over batches the log cleaner rewrote: one whose last offset lies past
its last record, and one that holds no record (a producer's last batch). The position moves past
each batch's last offset, so the next fetch never asks for those offsets again, and the end of the
partition is reported once it is reached."""
from __future__ import annotations

import pytest

from broker.client.fetch_state import FetchState
from broker.client.message import TopicPartition
from broker.client.start_offsets import EARLIEST
from broker.clock import ManualClock
from broker.errors import PartitionEOF
from broker.records import arrow_body
from broker.records.batch import stamp_producer, validate_batches
from broker.records.reader import decode_available, next_fetch_offset
from broker.storage import cleaner
from tests.unit._logkit import MAX_BATCH, open_log

pytestmark = pytest.mark.unit

TP0 = ("t", 0)
COMPACT = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": 0.0}


def append(log, keys, seq=None, pid=9):
    data = arrow_body.encode_batch(arrow_body.record_batch(list(keys), [b"v"] * len(keys), [1000] * len(keys)))
    if seq is not None:
        data = stamp_producer(data, pid, 0, seq)
    return log.append(data, validate_batches(data, max_batch_bytes=MAX_BATCH))


def cleaned_log(tmp_path):
    """Offsets 0-2: a (b and c superseded, producer 8's last batch still ends at 2); 3-4: b, c;
    5-6: producer 9's last batch, emptied; 7-8: d, e; then the active segment is empty."""
    log = open_log(tmp_path, COMPACT, ManualClock())
    append(log, [b"a", b"b", b"c"], 0, pid=8)
    append(log, [b"b", b"c"])
    append(log, [b"d", b"e"], 0)
    append(log, [b"d", b"e"])
    log.roll()
    cleaner.clean(log, log.log_end_offset, 10_000)
    return log


def fetch(state, log, offset, end):
    """One fetch of the consumer from ``offset`` (fetcher.py's two steps); the fetch's ``following``."""
    data = bytes(log.read(offset, 1 << 20, end) or b"")  # up to the high watermark, as a leader serves
    following = next_fetch_offset(data)
    assert state.on_fetched(TP0, 0, end, 0, following)
    decoded, failure = decode_available(data, offset)
    state.on_decoded(TP0, 0, offset, decoded, failure, following, end)
    return following


def take_all(state):
    out = []
    while (chunk := state.head()) is not None:
        message = state.take_one(chunk)
        out.append(message.offset() if message.error() is None else type(message.error()).__name__)
    while state.events:
        e = state.events.popleft()
        out.append(("event", e.offset(), isinstance(e.error().exception(), PartitionEOF)))
    return out


def test_the_position_moves_past_cut_and_emptied_batches(tmp_path):
    log = cleaned_log(tmp_path)
    end = log.log_end_offset
    assert end == 9
    state = FetchState(EARLIEST, True, 0.1, 1 << 20, ManualClock())
    state.assign([TopicPartition("t", 0, 1)])             # inside the cut batch, past its record
    assert fetch(state, log, 1, end) == 9
    assert take_all(state) == [3, 4, 7, 8]
    assert state.position(TP0) == 9


def test_a_fetch_holding_only_an_emptied_batch_moves_on_and_reports_the_end(tmp_path):
    log = cleaned_log(tmp_path)
    state = FetchState(EARLIEST, True, 0.1, 1 << 20, ManualClock())
    state.assign([TopicPartition("t", 0, 5)])
    assert fetch(state, log, 5, 7) == 7                  # the high watermark at 7: the empty batch only
    assert state.partitions[TP0].fetch_offset == 7 and state.position(TP0) == 7
    assert take_all(state) == [("event", 7, True)]       # the end of the partition, at once
