"""Record batches: Arrow body round trips, and validate_batches refusing every kind of damage."""
from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.errors import (CorruptRecordError, InvalidRecordError, MessageTooLargeError,
                           RiverlogError, UnsupportedVersionError)
from broker.records import arrow_body, ipc_layout
from broker.records.batch import (COMPRESSION_MASK, CRC_START, HEADER_SIZE, MAGIC_ARROW,
                                  MAGIC_KAFKA_V2, TRANSACTIONAL, build_batch, compute_crc, iter_headers,
                                  parse_header, stamp_log_append_time, validate_batches,
                                  with_offsets)
from broker.records.reader import decode_available, decode_records

pytestmark = pytest.mark.unit

MAX = 10**7
FAST = settings(max_examples=60, deadline=None, database=None)

header_st = st.tuples(st.text(max_size=8), st.binary(max_size=16))
record_st = st.tuples(
    st.none() | st.binary(max_size=24),                        # key
    st.none() | st.binary(max_size=120),                       # value
    st.integers(min_value=0, max_value=2**53),                 # timestamp
    st.none() | st.lists(header_st, max_size=3),               # headers
)
records_st = st.lists(record_st, min_size=1, max_size=12)
compression_st = st.sampled_from(sorted(arrow_body.COMPRESSION_CODES))


def encode_records(records, compression="none") -> bytes:
    keys, values, timestamps, headers = (list(c) for c in zip(*records))
    return arrow_body.encode_batch(arrow_body.record_batch(keys, values, timestamps, headers), compression)


def expected_rows(records) -> list[dict]:
    """What decoding must give back: empty header lists come back as null."""
    return [{"key": k, "value": v, "timestamp": t,
             "headers": [{"key": hk, "value": hv} for hk, hv in h] if h else None}
            for k, v, t, h in records]


def decode_all(data, start_offset=0) -> list[dict]:
    return [row for b in decode_records(data, start_offset) for row in b.records.to_pylist()]


def flip(data: bytes, index: int, xor: int = 0xFF) -> bytes:
    out = bytearray(data)
    out[index] ^= xor
    return bytes(out)


def rechecksum(data: bytearray, pos: int = 0) -> bytes:
    """Recompute the CRC of the batch at ``pos`` after a deliberate header edit."""
    header = parse_header(data, pos)
    struct.pack_into(">I", data, pos + 17, compute_crc(data, pos, header.size))
    return bytes(data)


# --------------------------------------------------------------------------------- round trips
@FAST
@given(records=records_st, compression=compression_st)
def test_encode_validate_decode_round_trip(records, compression):
    data = encode_records(records, compression)

    [header] = validate_batches(data, max_batch_bytes=MAX)

    timestamps = [r[2] for r in records]
    assert header.size == len(data)
    assert header.magic == MAGIC_ARROW
    assert header.record_count == len(records)
    assert header.last_offset_delta == len(records) - 1
    assert (header.base_timestamp, header.max_timestamp) == (min(timestamps), max(timestamps))
    assert header.compression == arrow_body.COMPRESSION_CODES[compression]
    assert not header.is_log_append_time
    assert decode_all(data) == expected_rows(records)


@FAST
@given(batches=st.lists(records_st, min_size=1, max_size=4), first_offset=st.integers(0, 2**40),
       epoch=st.integers(0, 2**31 - 1), start=st.integers(0, 60), compression=compression_st)
def test_concatenated_batches_decode_from_any_start_offset(batches, first_offset, epoch, start, compression):
    data = b"".join(encode_records(r, compression) for r in batches)
    headers = validate_batches(data, max_batch_bytes=MAX)
    assigned = b"".join(with_offsets(data, headers, first_offset, epoch))

    all_rows = [row for r in batches for row in expected_rows(r)]
    decoded = decode_records(assigned, first_offset + start)

    assert [row for b in decoded for row in b.records.to_pylist()] == all_rows[start:]
    if decoded:
        assert decoded[0].base_offset == first_offset + start
        assert decoded[-1].next_offset == first_offset + len(all_rows)


def test_all_null_headers_and_keys_round_trip():
    data = arrow_body.encode_batch(arrow_body.record_batch([None, None], [None, b""], [5, 3]))
    assert decode_all(data) == [{"key": None, "value": None, "timestamp": 5, "headers": None},
                                {"key": None, "value": b"", "timestamp": 3, "headers": None}]


@pytest.mark.parametrize("compression", sorted(arrow_body.COMPRESSION_CODES))
def test_slice_of_a_batch_encodes_only_the_slice(compression):
    full = arrow_body.record_batch([b"k%d" % i for i in range(10)], [b"v" * i for i in range(10)],
                                   list(range(10)), [{"h": str(i)} if i % 2 else None for i in range(10)])
    part = full.slice(3, 4)
    data = arrow_body.encode_batch(part, compression)
    assert validate_batches(data, max_batch_bytes=MAX)[0].record_count == 4
    assert decode_all(data) == part.to_pylist()


# ----------------------------------------------------------------------------------- damage
@FAST
@given(records=records_st, compression=compression_st, where=st.floats(0, 1, exclude_max=True),
       xor=st.integers(1, 255))
def test_any_byte_flip_in_crc_range_is_corrupt(records, compression, where, xor):
    data = encode_records(records, compression)
    index = CRC_START + int(where * (len(data) - CRC_START))
    with pytest.raises(CorruptRecordError):
        validate_batches(flip(data, index, xor), max_batch_bytes=MAX)


@FAST
@given(records=st.lists(records_st, min_size=2, max_size=3), which=st.integers(0, 2),
       where=st.floats(0, 1, exclude_max=True), xor=st.integers(1, 255))
def test_byte_flip_in_any_batch_of_a_payload_is_refused(records, which, where, xor):
    batches = [encode_records(r) for r in records]
    which %= len(batches)
    start = sum(len(b) for b in batches[:which])
    index = start + 8 + int(where * (len(batches[which]) - 8))   # anything but the base offset
    if 12 <= index - start < 16:
        index = start + 16 + (index - start - 12)  # the leader epoch is not checked either
    damaged = flip(b"".join(batches), index, xor)
    with pytest.raises(RiverlogError):
        validate_batches(damaged, max_batch_bytes=MAX)


def test_flipping_magic_or_crc_bytes_is_refused_but_offset_and_epoch_are_not_checked():
    data = encode_records([(b"k", b"v", 1, None)])
    with pytest.raises(UnsupportedVersionError):
        validate_batches(flip(data, 16), max_batch_bytes=MAX)
    for i in range(17, 21):
        with pytest.raises(CorruptRecordError):
            validate_batches(flip(data, i), max_batch_bytes=MAX)
    # base offset [0, 8) and partition leader epoch [12, 16) are rewritten by the leader, outside the CRC
    for i in [*range(0, 8), *range(12, 16)]:
        assert len(validate_batches(flip(data, i), max_batch_bytes=MAX)) == 1


@FAST
@given(records=records_st, where=st.floats(0, 1, exclude_min=True, exclude_max=True))
def test_truncated_payload_is_corrupt(records, where):
    data = encode_records(records)
    cut = max(1, int(where * len(data)))
    with pytest.raises(CorruptRecordError):
        validate_batches(data[:cut], max_batch_bytes=MAX)


@FAST
@given(first=records_st, second=records_st, where=st.floats(0, 1, exclude_min=True, exclude_max=True))
def test_payload_truncated_inside_its_second_batch_is_corrupt(first, second, where):
    a, b = encode_records(first), encode_records(second)
    cut = len(a) + max(1, int(where * len(b)))
    with pytest.raises(CorruptRecordError):
        validate_batches((a + b)[:cut], max_batch_bytes=MAX)


def test_empty_payload_is_invalid():
    with pytest.raises(InvalidRecordError):
        validate_batches(b"", max_batch_bytes=MAX)


def test_impossible_length_field_is_corrupt():
    data = bytearray(encode_records([(None, b"v", 1, None)]))
    struct.pack_into(">i", data, 8, 10)  # shorter than the header itself
    with pytest.raises(CorruptRecordError):
        validate_batches(bytes(data), max_batch_bytes=MAX)


def test_garbage_body_with_valid_crc_is_invalid_record():
    data = build_batch(b"garbage, not an Arrow IPC message at all", record_count=1,
                       base_timestamp=0, max_timestamp=0)
    with pytest.raises(InvalidRecordError):
        validate_batches(data, max_batch_bytes=MAX)


@pytest.mark.parametrize("body", [b"", b"\xff\xff\xff\xff\x00\x00\x00\x00", b"\x00\x00\x00\x00"],
                         ids=["empty", "end-of-stream-marker", "legacy-end-of-stream"])
def test_body_without_a_record_batch_message_is_invalid_record(body):
    """A header-only batch (or one whose body is Arrow's end-of-stream marker) holds no records."""
    data = build_batch(body, record_count=1, base_timestamp=0, max_timestamp=0)
    with pytest.raises(InvalidRecordError):
        validate_batches(data, max_batch_bytes=MAX)


def test_schema_message_as_body_is_invalid_record():
    data = build_batch(arrow_body.SCHEMA.serialize().to_pybytes(), record_count=1,
                       base_timestamp=0, max_timestamp=0)
    with pytest.raises(InvalidRecordError):
        validate_batches(data, max_batch_bytes=MAX)


def test_body_with_trailing_bytes_is_invalid_record():
    body = arrow_body.encode_body(arrow_body.record_batch([None], [b"v"], [1])).to_pybytes()
    data = build_batch(body + b"\0" * 8, record_count=1, base_timestamp=1, max_timestamp=1)
    with pytest.raises(InvalidRecordError):
        validate_batches(data, max_batch_bytes=MAX)


@settings(max_examples=100, deadline=None, database=None, derandomize=True)
@given(records=records_st, edits=st.lists(st.tuples(st.floats(0, 1, exclude_max=True), st.integers(0, 255)),
                                          min_size=1, max_size=3),
       keep=st.floats(0.01, 1))
def test_damaged_body_with_valid_crc_is_refused_typed_or_decodes_to_its_record_count(records, edits, keep):
    body = bytearray(arrow_body.encode_body(arrow_body.record_batch(
        *[list(c) for c in zip(*records)])).to_pybytes())
    for where, value in edits:
        body[int(where * len(body))] = value
    body = body[:max(8, int(keep * len(body)))]
    data = build_batch(bytes(body), record_count=len(records), base_timestamp=0, max_timestamp=0)
    try:
        validate_batches(data, max_batch_bytes=MAX)
    except (InvalidRecordError, CorruptRecordError):
        return
    # Accepted: the metadata agrees with the header, so decoding either yields exactly the
    # declared rows or fails with a typed error (never a crash or a silently different count).
    try:
        assert arrow_body.decode_checked(data[HEADER_SIZE:], len(records)).num_rows == len(records)
    except ValueError as refused:  # decode_checked's own refusal, not Arrow's error leaking through
        assert type(refused) is ValueError, repr(refused)
        assert str(refused).startswith(("Arrow body does not decode", "header declares")), refused


@pytest.mark.parametrize("magic", [0, 1, MAGIC_KAFKA_V2, 99])
def test_unknown_magic_is_unsupported_version(magic):
    body = arrow_body.encode_body(arrow_body.record_batch([None], [b"v"], [1])).to_pybytes()
    data = build_batch(body, record_count=1, base_timestamp=1, max_timestamp=1, magic=magic)
    with pytest.raises(UnsupportedVersionError):
        validate_batches(data, max_batch_bytes=MAX)


def test_batch_over_the_limit_is_too_large():
    data = encode_records([(b"k", b"v" * 500, 1, None)])
    assert validate_batches(data, max_batch_bytes=len(data))
    with pytest.raises(MessageTooLargeError) as info:
        validate_batches(data, max_batch_bytes=len(data) - 1)
    assert info.value.details == {"batch_bytes": len(data), "max_message_bytes": len(data) - 1}


@pytest.mark.parametrize("record_count, delta", [(0, -1), (2, 0), (1, 1), (-3, -4)])
def test_inconsistent_record_count_is_invalid_record(record_count, delta):
    data = bytearray(encode_records([(None, b"v", 1, None)]))
    struct.pack_into(">i", data, 23, delta)
    struct.pack_into(">i", data, 57, record_count)
    with pytest.raises(InvalidRecordError):
        validate_batches(rechecksum(data), max_batch_bytes=MAX)


# ------------------------------------------------------------------------ leader rewrites
@FAST
@given(batches=st.lists(records_st, min_size=1, max_size=4), first_offset=st.integers(0, 2**62),
       epoch=st.integers(-1, 2**31 - 1))
def test_with_offsets_assigns_offsets_and_epoch_keeping_crcs(batches, first_offset, epoch):
    data = b"".join(encode_records(r) for r in batches)
    headers = validate_batches(data, max_batch_bytes=MAX)

    out = b"".join(with_offsets(data, headers, first_offset, epoch))

    rewritten = validate_batches(out, max_batch_bytes=MAX)  # every CRC still holds
    expected_bases = [first_offset + sum(len(r) for r in batches[:i]) for i in range(len(batches))]
    assert [h.base_offset for h in rewritten] == expected_bases
    assert all(h.partition_leader_epoch == epoch for h in rewritten)
    assert [h.crc for h in rewritten] == [h.crc for h in headers]
    pos = 0
    for h in headers:  # everything from the magic on is byte-identical
        assert out[pos + 16: pos + h.size] == data[pos + 16: pos + h.size]
        pos += h.size


@FAST
@given(batches=st.lists(records_st, min_size=1, max_size=4), now=st.integers(0, 2**50),
       compression=compression_st)
def test_log_append_time_stamping_keeps_crcs_valid(batches, now, compression):
    data = b"".join(encode_records(r, compression) for r in batches)
    headers = validate_batches(data, max_batch_bytes=MAX)

    stamped = stamp_log_append_time(data, headers, now)

    after = validate_batches(stamped, max_batch_bytes=MAX)
    for before, h in zip(headers, after):
        assert h.is_log_append_time and h.max_timestamp == now
        assert h.base_timestamp == before.base_timestamp
        assert h.attributes & COMPRESSION_MASK == before.compression
        assert h.size == before.size
    pos = 0
    for h in headers:  # bodies untouched
        assert stamped[pos + HEADER_SIZE: pos + h.size] == data[pos + HEADER_SIZE: pos + h.size]
        pos += h.size
    decoded = decode_records(stamped, 0)
    assert all(b.log_append_time for b in decoded)
    assert [row["timestamp"] for b in decoded for row in b.records.to_pylist()] == \
        [now] * sum(len(r) for r in batches)
    assert [row["value"] for b in decoded for row in b.records.to_pylist()] == \
        [rec[1] for r in batches for rec in r]


# ------------------------------------------------------------------------------- reader
def test_decode_records_refuses_a_batch_with_a_bad_crc():
    data = encode_records([(None, b"value", 1, None)])
    with pytest.raises(CorruptRecordError):
        decode_records(flip(data, len(data) - 1), 0)


def test_decode_records_refuses_a_partial_batch_only():
    data = encode_records([(None, b"value" * 40, 1, None)])
    with pytest.raises(CorruptRecordError):
        decode_records(data[:-1], 0)


def test_decode_records_ignores_a_trailing_partial_batch():
    a = encode_records([(None, b"a", 1, None)])
    b = encode_records([(None, b"b", 2, None)])
    data = b"".join(with_offsets(a + b, validate_batches(a + b, max_batch_bytes=MAX), 0, 0))
    assert [row["value"] for batch in decode_records(data[:-5], 0) for row in batch.records.to_pylist()] == [b"a"]


def test_decode_records_skips_batches_below_start_offset():
    payload = encode_records([(None, b"a", 1, None)] * 3) + encode_records([(None, b"b", 2, None)] * 2)
    data = b"".join(with_offsets(payload, validate_batches(payload, max_batch_bytes=MAX), 10, 0))
    decoded = decode_records(data, 13)
    assert [(b.base_offset, b.records.num_rows, b.next_offset) for b in decoded] == [(13, 2, 15)]


def test_iter_headers_stops_at_a_partial_batch():
    a = encode_records([(None, b"a", 1, None)])
    b = encode_records([(None, b"b" * 100, 2, None)])
    assert [pos for pos, _ in iter_headers(a + b)] == [0, len(a)]
    assert [pos for pos, _ in iter_headers((a + b)[:-1])] == [0]


# ------------------------------------------------------------ header and Arrow metadata agree
def one_record_body(compression="none") -> bytes:
    return arrow_body.encode_body(arrow_body.record_batch([b"k"], [b"v"], [1]), compression).to_pybytes()


@pytest.mark.parametrize("declared", [2, 1000, 2**31 - 1])
@pytest.mark.parametrize("compression", sorted(arrow_body.COMPRESSION_CODES))
def test_record_count_beyond_the_body_is_corrupt(declared, compression):
    data = build_batch(one_record_body(compression), record_count=declared, base_timestamp=1, max_timestamp=1,
                       attributes=arrow_body.COMPRESSION_CODES[compression])
    with pytest.raises(CorruptRecordError, match=f"declares {declared} records but the Arrow body holds 1"):
        validate_batches(data, max_batch_bytes=MAX)


def test_record_count_below_the_body_is_corrupt():
    body = arrow_body.encode_body(arrow_body.record_batch([None] * 3, [b"v"] * 3, [1] * 3)).to_pybytes()
    with pytest.raises(CorruptRecordError, match="declares 1 records but the Arrow body holds 3"):
        validate_batches(build_batch(body, record_count=1, base_timestamp=1, max_timestamp=1), max_batch_bytes=MAX)


OTHER_SCHEMAS = [
    pa.record_batch([pa.array([1]), pa.array(["x"])], names=["a", "b"]),
    pa.record_batch([pa.array([b"k"]), pa.array([b"v"]), pa.array([1])], names=["key", "value", "timestamp"]),
    pa.record_batch([pa.array([b"k"]), pa.array([b"v"]), pa.array([1]), pa.array([b"h"])],
                    names=["key", "value", "timestamp", "headers"]),
    pa.record_batch([pa.array([b"k"]), pa.array([b"v"]), pa.array([1]), pa.array([b"h"]), pa.array([2])],
                    names=["key", "value", "timestamp", "headers", "extra"]),
    pa.record_batch([pa.array([b"k"], pa.binary_view()), pa.array([b"v"]), pa.array([1]),
                     pa.nulls(1, arrow_body.HEADER_TYPE)], names=["key", "value", "timestamp", "headers"]),
]


@pytest.mark.parametrize("batch", OTHER_SCHEMAS, ids=lambda b: ",".join(str(t) for t in b.schema.types))
def test_body_of_another_schema_is_corrupt(batch):
    data = build_batch(batch.serialize().to_pybytes(), record_count=1, base_timestamp=1, max_timestamp=1)
    with pytest.raises(CorruptRecordError, match="batch at byte 0"):
        validate_batches(data, max_batch_bytes=MAX)


def _edit_row_counts(body: bytes, rows: int) -> bytes:
    """The body with its flatbuffer claiming ``rows`` rows everywhere (buffers unchanged)."""
    out = bytearray(body)
    meta = memoryview(out)[8:]
    message = ipc_layout._Table(meta, struct.unpack_from("<I", meta, 0)[0])
    batch = ipc_layout._Table(meta, message.target(2))
    struct.pack_into("<q", meta, batch.field(0), rows)
    nodes = batch.target(1)
    for i in range(struct.unpack_from("<I", meta, nodes)[0]):
        struct.pack_into("<q", meta, nodes + 4 + 16 * i, rows)
    return bytes(out)


@pytest.mark.parametrize("compression", sorted(arrow_body.COMPRESSION_CODES))
def test_metadata_claiming_more_rows_than_its_buffers_hold_is_corrupt(compression):
    body = _edit_row_counts(one_record_body(compression), 1000)
    data = build_batch(body, record_count=1000, base_timestamp=1, max_timestamp=1,
                       attributes=arrow_body.COMPRESSION_CODES[compression])
    with pytest.raises(CorruptRecordError, match="buffer"):
        validate_batches(data, max_batch_bytes=MAX)


@pytest.mark.parametrize("body_compression, header_compression", [("none", "zstd"), ("lz4", "none"),
                                                                  ("zstd", "lz4")])
def test_header_compression_bits_must_match_the_body(body_compression, header_compression):
    data = build_batch(one_record_body(body_compression), record_count=1, base_timestamp=1, max_timestamp=1,
                       attributes=arrow_body.COMPRESSION_CODES[header_compression])
    with pytest.raises(CorruptRecordError, match="compressed with"):
        validate_batches(data, max_batch_bytes=MAX)


def test_transactional_batch_needs_a_producer_id():
    body = one_record_body()
    data = build_batch(body, record_count=1, base_timestamp=1, max_timestamp=1, attributes=TRANSACTIONAL)
    with pytest.raises(InvalidRecordError, match="transactional but has no producer id"):
        validate_batches(data, max_batch_bytes=MAX)
    ok = build_batch(body, record_count=1, base_timestamp=1, max_timestamp=1, attributes=TRANSACTIONAL,
                     producer_id=7, producer_epoch=0, base_sequence=0)
    assert validate_batches(ok, max_batch_bytes=MAX)[0].is_transactional


def test_last_offset_delta_disagreeing_with_the_count_names_both():
    data = bytearray(encode_records([(None, b"v", 1, None)] * 3))
    struct.pack_into(">i", data, 23, 2**31 - 2)
    with pytest.raises(InvalidRecordError, match="record_count=3 and last_offset_delta=2147483646"):
        validate_batches(rechecksum(data), max_batch_bytes=MAX)


# ------------------------------------------------------------ decoding stops at a bad batch
def _assigned(*batches: bytes) -> bytes:
    payload = b"".join(batches)
    return b"".join(bytes(p) for p in with_offsets(payload, list(h for _, h in iter_headers(payload)), 100, 0))


def test_decode_available_returns_the_batches_before_a_bad_one_and_its_offsets():
    good = encode_records([(None, b"a", 1, None), (None, b"b", 1, None)])
    bad = build_batch(one_record_body(), record_count=5, base_timestamp=1, max_timestamp=1)  # 5 declared, 1 held
    data = _assigned(good, bad, good)
    decoded, failure = decode_available(data, 100)
    assert [r["value"] for d in decoded for r in d.records.to_pylist()] == [b"a", b"b"]
    assert (failure.offset, failure.next_offset) == (102, 107)
    assert isinstance(failure.error, CorruptRecordError)
    assert failure.error.details == {"offset": 102, "next_offset": 107}
    assert "seek to 107" in failure.error.message
    after, none = decode_available(data, 107)
    assert none is None and [r["value"] for d in after for r in d.records.to_pylist()] == [b"a", b"b"]
    with pytest.raises(CorruptRecordError):
        decode_records(data, 100)


def test_garbage_offsets_pass_the_header_check_but_never_decode():
    """Values are the client's to check: offsets pointing outside their data fail full validation."""
    body = bytearray(one_record_body())
    layout = ipc_layout.read_layout(body)
    offset, length = layout.buffers[4]  # value offsets
    struct.pack_into("<i", body, layout.body_start + offset + 4, 10**6)
    data = build_batch(bytes(body), record_count=1, base_timestamp=1, max_timestamp=1)
    validate_batches(data, max_batch_bytes=MAX)
    decoded, failure = decode_available(_assigned(data), 100)
    assert decoded == [] and failure.offset == 100 and "does not decode" in failure.error.message


def test_batch_epochs_names_each_complete_batchs_leader_epoch_by_the_offset_after_it():
    from broker.records.reader import batch_epochs, next_fetch_offset

    def written(first_offset, n, epoch):
        data = encode_records([(None, b"v", 0, None)] * n)
        return b"".join(with_offsets(data, validate_batches(data, max_batch_bytes=MAX), first_offset, epoch))
    data = written(0, 3, 4) + written(3, 2, 6)
    assert batch_epochs(data) == {3: 4, 5: 6}
    assert batch_epochs(data[:-1]) == {3: 4} and next_fetch_offset(data[:-1]) == 3   # a torn batch: not counted


@pytest.mark.parametrize("compression", ["none", "lz4", "zstd"])
def test_a_bodys_timestamp_range_is_read_from_its_timestamps_alone_and_skips_nulls(compression):
    """What the leader sets a produced batch's base and max timestamps to: the header
    :func:`arrow_body.encode_batch` writes, from the timestamps' buffer only (inflated alone when
    compressed), or through Arrow when the column has nulls, whose values are undefined."""
    from broker.records.batch import parse_header
    plain = arrow_body.record_batch([b"a", b"b", b"c"], [b"1", b"2", b"3"], [40, -1, 7])
    data = arrow_body.encode_batch(plain, compression)
    h = parse_header(data, 0)
    assert arrow_body.timestamp_range(memoryview(data)[HEADER_SIZE:], h.compression) == (-1, 40) \
        == (h.base_timestamp, h.max_timestamp)
    holed = plain.set_column(2, "timestamp", pa.array([40, None, 7], pa.int64()))
    data = arrow_body.encode_batch(holed, compression)
    h = parse_header(data, 0)
    assert arrow_body.timestamp_range(memoryview(data)[HEADER_SIZE:], h.compression) == (7, 40) \
        == (h.base_timestamp, h.max_timestamp)


@pytest.mark.parametrize("compression", ["lz4", "zstd"])
def test_compressed_timestamps_that_claim_too_much_or_do_not_inflate_are_corrupt(compression):
    """A fuzzed uncompressed-length prefix would have the broker allocate it before inflating (a
    MemoryError, answered as an unknown server error): it is refused as corrupt, as bytes that do
    not inflate are."""
    from broker.records.batch import parse_header
    data = arrow_body.encode_batch(arrow_body.record_batch([b"k"] * 10, [b"v"] * 10, list(range(10))), compression)
    body, codec = bytes(data[HEADER_SIZE:]), parse_header(data, 0).compression
    layout = ipc_layout.read_layout(body)
    node = arrow_body._LAYOUT.top_level[2]
    at, length = layout.buffers[next(i for i, (n, kind) in enumerate(arrow_body._LAYOUT.buffer_kinds)
                                     if n == node and kind == ipc_layout.FIXED8)]
    at += layout.body_start
    huge = bytearray(body)
    struct.pack_into("<q", huge, at, 2**60)
    garbage = bytearray(body)
    garbage[at + 8: at + length] = bytes(length - 8)
    for bad in (huge, garbage):
        with pytest.raises(CorruptRecordError, match="timestamps do not decode"):
            arrow_body.timestamp_range(memoryview(bytes(bad)), codec)
