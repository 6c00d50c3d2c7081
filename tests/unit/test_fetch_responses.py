"""How fetch responses and fetch errors move a partition, against librdkafka's and Kafka's consumer:
a response for offsets the partition has moved past (two brokers asked while its leader moves),
_PARTITION_EOF per end offset, and where an error event stands among the records already fetched.
The fetcher's response step (``Fetcher._advance``) runs on real response bytes; no broker, no threads."""
from __future__ import annotations

import threading
import types

import pytest

from broker.client.fetch_state import FetchState
from broker.client.fetcher import Fetcher
from broker.client.message import TopicPartition
from broker.client.start_offsets import EARLIEST
from broker.clock import ManualClock
from broker.errors import InvalidRequestError, KafkaError, OffsetOutOfRangeError, PartitionEOF
from broker.proto import riverlog_pb2 as pb
from broker.records.arrow_body import encode_batch, record_batch
from broker.records.reader import decode_available

pytestmark = pytest.mark.unit

TP0 = ("orders", 0)


def batch(base: int, n: int) -> bytes:
    return encode_batch(record_batch([None] * n, [b"v%d" % (base + i) for i in range(n)], [1000] * n),
                        base_offset=base)


def response(records: bytes = b"", high_watermark: int = 100, error: int = 0) -> pb.FetchResponse:
    return pb.FetchResponse(topics=[pb.FetchTopicResult(name=TP0[0], partitions=[pb.FetchPartitionResult(
        partition=TP0[1], error_code=error, high_watermark=high_watermark, last_stable_offset=high_watermark,
        log_start_offset=0, log_end_offset=high_watermark, records=records)])])


def shell(state: FetchState):
    """What ``Fetcher._advance`` uses of its fetcher: the state and the consumer's lock."""
    return types.SimpleNamespace(state=state, _cond=threading.Condition(), cluster=None)


def advance_and_decode(fetcher, state: FetchState, answer: pb.FetchResponse, parts) -> None:
    """The fetcher's two steps for one response: headers (``_advance``), then decoding."""
    for key, generation, offset, r, records, following in Fetcher._advance(fetcher, answer, parts):
        decoded, failure = decode_available(records, offset)
        state.on_decoded(key, generation, offset, decoded, failure, following, r.high_watermark)


def drain(state: FetchState) -> list:
    out = []
    while True:
        if state.events:
            e = state.events.popleft()
            out.append(("event", e.offset(), e.error().code()))
            continue
        chunk = state.head()
        if chunk is None:
            return out
        m = state.take_one(chunk)
        out.append(m.offset() if m.error() is None else ("event", m.offset(), m.error().code()))


def test_the_same_offsets_fetched_from_the_old_and_the_new_leader_are_delivered_once():
    """The partition's leader moves from broker 1 to 2 while broker 1's fetch is in flight: both
    fetches ask for offset 0, both answer records 0..9. Kafka's FetchCollector discards a response
    whose fetch offset is no longer the position; librdkafka one from a broker the partition left."""
    state = FetchState(EARLIEST, False, 0.1, 1 << 20, ManualClock())
    state.assign([TopicPartition(TP0[0], TP0[1], 0)])
    to_old, _ = state.to_fetch(1, lambda t, p: 1)
    to_new, _ = state.to_fetch(2, lambda t, p: 2)           # metadata refreshed: broker 2 leads now
    assert to_old == to_new == [(TP0, 0, 0)]
    fetcher = shell(state)
    advance_and_decode(fetcher, state, response(batch(0, 10)), to_old)
    advance_and_decode(fetcher, state, response(batch(0, 10)), to_new)
    assert drain(state) == list(range(10))
    assert state.position(TP0) == 10 and state.partitions[TP0].fetch_offset == 10


def test_an_error_for_offsets_the_partition_moved_past_is_not_reported():
    state = FetchState(EARLIEST, False, 0.1, 1 << 20, ManualClock())
    state.assign([TopicPartition(TP0[0], TP0[1], 0)])
    parts, _ = state.to_fetch(1, lambda t, p: 1)
    fetcher = shell(state)
    advance_and_decode(fetcher, state, response(batch(0, 10)), parts)
    advance_and_decode(fetcher, state, response(error=InvalidRequestError.code), parts)   # the stale one
    assert drain(state) == list(range(10))


def test_a_fetch_error_is_reported_at_the_fetch_offset_behind_the_records_before_it():
    """librdkafka's rd_kafka_consumer_err gives a failed fetch's error the offset it was fetching
    and queues it on the partition's queue, behind the messages fetched before it."""
    state = FetchState(EARLIEST, False, 0.1, 1 << 20, ManualClock())
    state.assign([TopicPartition(TP0[0], TP0[1], 7)])
    parts, _ = state.to_fetch(1, lambda t, p: 1)
    advance_and_decode(shell(state), state, response(error=InvalidRequestError.code), parts)
    assert drain(state) == [("event", 7, InvalidRequestError.code)]
    advance_and_decode(shell(state), state, response(batch(7, 3)), parts)
    parts, _ = state.to_fetch(1, lambda t, p: 1)
    advance_and_decode(shell(state), state, response(error=InvalidRequestError.code), parts)
    assert drain(state) == [7, 8, 9, ("event", 10, InvalidRequestError.code)]


def test_auto_offset_reset_error_comes_after_the_records_fetched_before_it():
    """librdkafka queues _AUTO_OFFSET_RESET on the partition's queue behind the messages already
    fetched: the application sees records 0..9, then the error at offset 10 where it now stands."""
    state = FetchState(None, False, 0.1, 1 << 20, ManualClock())
    state.assign([TopicPartition(TP0[0], TP0[1], 0)])
    fetcher = shell(state)
    advance_and_decode(fetcher, state, response(batch(0, 10)), state.to_fetch(1, lambda t, p: 1)[0])
    parts, _ = state.to_fetch(1, lambda t, p: 1)
    assert parts == [(TP0, 10, 0)]
    advance_and_decode(fetcher, state, response(error=OffsetOutOfRangeError.code), parts)
    assert drain(state) == list(range(10)) + [("event", 10, KafkaError._AUTO_OFFSET_RESET)]
    assert state.position(TP0) == 10
    assert state.to_fetch(1, lambda t, p: 1) == ([], [])    # stopped until seek() or resume()


def test_partition_eof_is_reported_again_when_the_end_moved_over_markers_only():
    """A read_committed consumer at the end; a transaction aborts (records 5..7, marker 8): the
    fetch returns nothing to deliver, yet the end moved to 9. librdkafka reports _PARTITION_EOF
    once per end offset (its eof_offset), so 9 is reported; so is an end reached after seek()."""
    state = FetchState(EARLIEST, True, 0.1, 1 << 20, ManualClock())
    state.assign([TopicPartition(TP0[0], TP0[1], 0)])
    assert state.on_fetched(TP0, 0, 5, 0, 5)
    state.on_decoded(TP0, 0, 0, decode_available(batch(0, 5), 0)[0], None, 5, 5)
    assert drain(state) == [0, 1, 2, 3, 4]
    assert state.on_fetched(TP0, 0, 5, 0, None)
    state.on_decoded(TP0, 0, 5, [], None, None, 5)
    assert state.on_fetched(TP0, 0, 9, 0, 9)                # aborted batches and their marker only
    state.on_decoded(TP0, 0, 5, [], None, 9, 9)
    assert state.on_fetched(TP0, 0, 9, 0, None)
    state.on_decoded(TP0, 0, 9, [], None, None, 9)          # the same end again: nothing new
    events = [(e.offset(), isinstance(e.error().exception(), PartitionEOF)) for e in state.events]
    assert events == [(5, True), (9, True)]
    state.events.clear()
    state.seek(TP0, 9)
    generation = state.partitions[TP0].generation
    assert state.on_fetched(TP0, generation, 9, 0, None)
    state.on_decoded(TP0, generation, 9, [], None, None, 9)
    assert [e.offset() for e in state.events] == [9]



@pytest.mark.parametrize("reset", ["earliest", "latest"])
def test_records_fetched_before_an_offset_reset_are_still_delivered(reset):
    """A lagging consumer at 0 has prefetched 0..9; retention then deletes up to 50, and the fetch
    at 10 is out of range. librdkafka's offset reset does not bump the fetch version, so the
    prefetched messages are still consumed (Kafka's consumer fetches at the position only after
    its buffered records were returned): 0..9 come out, then the partition goes on at the reset."""
    from broker.client.start_offsets import LATEST
    state = FetchState(EARLIEST if reset == "earliest" else LATEST, False, 0.1, 1 << 20, ManualClock())
    state.assign([TopicPartition(TP0[0], TP0[1], 0)])
    fetcher = shell(state)
    advance_and_decode(fetcher, state, response(batch(0, 10)), state.to_fetch(1, lambda t, p: 1)[0])
    assert [state.take_one(state.head()).offset() for _ in range(3)] == [0, 1, 2]
    parts, _ = state.to_fetch(1, lambda t, p: 1)
    answer = response(error=OffsetOutOfRangeError.code)
    answer.topics[0].partitions[0].log_start_offset = 50
    answer.topics[0].partitions[0].log_end_offset = 80
    Fetcher._advance(fetcher, answer, parts)
    assert state.position(TP0) == 3                          # the records in hand are not skipped
    if reset == "latest":
        (_, generation, offset), = state.to_fetch(1, lambda t, p: 1)[1]
        assert state.reset_target(TP0, offset) == LATEST
        assert state.reset_resolved(TP0, generation, 80)    # what ListOffsets answered
    start = 50 if reset == "earliest" else 80
    parts, _ = state.to_fetch(1, lambda t, p: 1)
    assert [(k, o) for k, o, _ in parts] == [(TP0, start)]
    assert drain(state) == list(range(3, 10))
    assert state.position(TP0) == start
    advance_and_decode(fetcher, state, response(batch(start, 2)), parts)
    assert drain(state) == [start, start + 1]


def test_pausing_during_a_deferred_reset_refetches_from_the_position():
    """Pausing drops what was prefetched; resume() fetches again from the position, the offset
    after the last record taken (a reset still needed is then met again)."""
    from broker.client.start_offsets import LATEST
    state = FetchState(LATEST, False, 0.1, 1 << 20, ManualClock())
    state.assign([TopicPartition(TP0[0], TP0[1], 0)])
    fetcher = shell(state)
    advance_and_decode(fetcher, state, response(batch(0, 10)), state.to_fetch(1, lambda t, p: 1)[0])
    assert state.take_one(state.head()).offset() == 0
    parts, _ = state.to_fetch(1, lambda t, p: 1)
    Fetcher._advance(fetcher, response(error=OffsetOutOfRangeError.code), parts)
    state.set_paused([TP0], True)
    state.set_paused([TP0], False)
    assert [(k, o) for k, o, _ in state.to_fetch(1, lambda t, p: 1)[0]] == [(TP0, 1)]
    assert drain(state) == []
