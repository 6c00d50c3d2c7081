"""The record accumulator's per-record path: fields in, columns out, and the limits that refuse records."""
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.client.accumulator import RecordAccumulator
from broker.client.producer_batch import RECORD_OVERHEAD, record_sizes

pytestmark = pytest.mark.unit

_record = st.tuples(
    st.none() | st.binary(max_size=8),  # key
    st.none() | st.binary(max_size=8),  # value (None: a tombstone)
    st.integers(0, 2**62),  # timestamp
    st.none() | st.lists(st.tuples(st.text(max_size=3), st.binary(max_size=3)), max_size=2),  # headers
    st.integers(-1, 5),  # partition
    st.none() | st.sampled_from([print, repr]),  # callback
)


@given(st.lists(st.tuples(st.sampled_from(["a", "b"]), _record), min_size=1, max_size=30))
@settings(max_examples=60, deadline=None)
def test_records_come_out_per_topic_in_produce_order_with_every_field(records):
    acc = RecordAccumulator(1.0, 1 << 30, 1 << 30)
    for topic, (key, value, ts, headers, partition, callback) in records:
        acc.append(topic, key, value, ts, headers, partition, callback, RECORD_OVERHEAD)
    assert acc.outstanding == len(records) and acc.buffered_bytes == RECORD_OVERHEAD * len(records)
    for topic, buf in acc.buffers.items():
        mine = [r for t, r in records if t == topic]
        assert buf.count == len(mine)
        assert buf.keyed == any(k is not None or p >= 0 for k, _, _, _, p, _ in mine)
        (chunk,) = buf.chunks
        batch, explicit, callbacks = chunk.to_arrow()
        assert batch.column(0).to_pylist() == [r[0] for r in mine]
        assert batch.column(1).to_pylist() == [r[1] for r in mine]
        assert batch.column(2).to_pylist() == [r[2] for r in mine]
        assert [h or None for h in batch.column(3).to_pylist()] == [
            [{"key": k, "value": v} for k, v in r[3]] or None if r[3] is not None else None for r in mine]
        assert explicit.tolist() == [r[4] for r in mine]
        assert callbacks == ([r[5] for r in mine] if any(r[5] for r in mine) else None)
        assert record_sizes(batch).tolist() == [
            RECORD_OVERHEAD + len(r[0] or b"") + len(r[1] or b"") for r in mine]


def test_a_table_between_records_keeps_the_order_and_the_next_record_opens_a_new_chunk():
    acc = RecordAccumulator(1.0, 1 << 30, 1 << 30)
    acc.append("t", None, b"1", 1, None, -1, None, 33)
    table = pa.RecordBatch.from_pydict({"key": pa.array([None], pa.binary()), "value": [b"2"]})
    acc.add_table("t", table, -1, None, 10, 1000)
    acc.append("t", None, b"3", 3, None, -1, None, 33)
    chunks = acc.buffers["t"].chunks
    assert [c.to_arrow()[0].column(1).to_pylist() for c in chunks] == [[b"1"], [b"2"], [b"3"]]
    assert acc.outstanding == 3 and acc.buffers["t"].count == 3


def test_queue_buffering_max_messages_and_buffer_memory_refuse_records_with_buffer_error():
    acc = RecordAccumulator(1.0, 1 << 30, 1 << 30, max_records=2)
    acc.append("t", None, b"x", 1, None, -1, None, 33)
    acc.append("t", None, b"x", 1, None, -1, None, 33)
    with pytest.raises(BufferError, match="queue.buffering.max.messages"):
        acc.append("t", None, b"x", 1, None, -1, None, 33)
    acc.release(0, 1)  # one delivery report served
    acc.append("t", None, b"x", 1, None, -1, None, 33)
    small = RecordAccumulator(1.0, 1 << 30, 100)
    small.append("t", None, b"x" * 50, 1, None, -1, None, 82)
    with pytest.raises(BufferError, match="buffer.memory"):
        small.append("u", None, b"x", 1, None, -1, None, 33)
    assert small.outstanding == 1 and "u" not in small.buffers
