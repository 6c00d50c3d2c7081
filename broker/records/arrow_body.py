"""The native batch body: one Arrow IPC record-batch message with a fixed schema.

Layout: an encapsulated Arrow IPC message (continuation marker 0xFFFFFFFF, little-endian int32
metadata length, flatbuffer ``Message`` metadata, then the 8-byte aligned body buffers), exactly what
``pyarrow.RecordBatch.serialize`` writes, without the schema message: the schema is the fixed
``SCHEMA`` below, so every batch saves its ~400 bytes. Arrow's own LZ4-frame or ZSTD buffer
compression may be applied inside the message; the batch header's compression bits mirror it so
tools can see it without reading the body.

Columns: ``key`` binary (null = no key), ``value`` binary (null = tombstone), ``timestamp`` int64
ms since the epoch, ``headers`` list<struct<key: string, value: binary>> (null = no headers).
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from broker.records import arrow_arrays, ipc_layout
from broker.records.batch import (COMPRESSION_LZ4, COMPRESSION_NONE, COMPRESSION_ZSTD,
                                  MAGIC_ARROW, build_batch)

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
SCHEMA = pa.schema([
    ("key", pa.binary()),
    ("value", pa.binary()),
    ("timestamp", pa.int64()),
    ("headers", HEADER_TYPE),
])
_SCHEMA_MESSAGE_SIZE = SCHEMA.serialize().size
_LAYOUT = ipc_layout.expected_for(SCHEMA)
_EOS_SIZE = 8

COMPRESSION_CODES = {"none": COMPRESSION_NONE, "lz4": COMPRESSION_LZ4, "zstd": COMPRESSION_ZSTD}
_CODECS = {COMPRESSION_NONE: None, COMPRESSION_LZ4: ipc_layout.CODEC_LZ4_FRAME,
           COMPRESSION_ZSTD: ipc_layout.CODEC_ZSTD}
_WRITE_OPTIONS = {
    name: pa.ipc.IpcWriteOptions(compression=None if name == "none" else name)
    for name in COMPRESSION_CODES
}


def encode_body(batch: pa.RecordBatch, compression: str = "none") -> pa.Buffer:
    """Serialise ``batch`` (of ``SCHEMA``) as one IPC record-batch message."""
    if compression == "none":
        return batch.serialize()
    # RecordBatch.serialize takes no write options, so compressed bodies are cut out of a
    # one-batch IPC stream: [schema message][record batch message][end-of-stream marker].
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, SCHEMA, options=_WRITE_OPTIONS[compression]) as writer:
        writer.write_batch(batch)
    stream = sink.getvalue()
    return stream.slice(_SCHEMA_MESSAGE_SIZE, stream.size - _SCHEMA_MESSAGE_SIZE - _EOS_SIZE)


def decode_body(body) -> pa.RecordBatch:
    """The Arrow batch in a body (zero-copy unless compressed)."""
    return pa.ipc.read_record_batch(pa.py_buffer(body), SCHEMA)


def decode_produced(body) -> pa.RecordBatch:
    """Decode a produced body the broker must read (recompression, keys on a compacted topic,
    record timestamps); CorruptRecord when it does not decode, e.g. a compressed buffer whose
    bytes do not inflate, which the metadata-only produce check cannot see."""
    try:
        return decode_body(body)
    except (pa.ArrowException, OSError, EOFError) as e:
        from broker.errors import CorruptRecordError
        raise CorruptRecordError(f"a batch body does not decode ({e})") from None


def decode_checked(body, record_count: int) -> pa.RecordBatch:
    """Decode a body that came from outside, refusing any it cannot be trusted to hold.

    Raises ValueError when the body does not decode, holds another number of rows than
    ``record_count``, or has values that break Arrow's rules (offsets outside their data, invalid
    UTF-8 in header keys): a full validation, linear in the batch, so reading such a body never
    goes out of bounds.
    """
    try:
        records = decode_body(body)
        records.validate(full=True)
    except (pa.ArrowException, OSError, EOFError) as e:
        raise ValueError(f"Arrow body does not decode ({e})") from None
    if records.num_rows != record_count:
        raise ValueError(f"header declares {record_count} records but the Arrow body holds {records.num_rows}")
    return records


class BodyMismatch(ValueError):
    """A well-framed body whose rows or shape disagree with its batch header."""


def check_framing(body, record_count: int | None = None, compression: int = COMPRESSION_NONE) -> None:
    """Raise ValueError unless ``body`` is exactly one IPC record-batch message, and
    :class:`BodyMismatch` when it is one but holds other than ``record_count`` rows, has another
    schema's shape, or another compression than the header's ``compression`` bits.

    Reads the message metadata only (microseconds); buffers are neither decompressed nor decoded.
    """
    buf = pa.py_buffer(body)
    try:
        message = pa.ipc.read_message(buf)
    except (pa.ArrowInvalid, OSError, EOFError) as e:
        raise ValueError(str(e)) from None
    if message.type != "record batch":
        raise ValueError(f"IPC message type is {message.type!r}")
    framed = message.metadata.size + message.body.size
    # The metadata size excludes its 8-byte prefix (continuation marker and length).
    if framed + 8 != buf.size:
        raise ValueError(f"message frames {framed + 8} bytes but the body has {buf.size}")
    if record_count is None:
        return
    if compression not in _CODECS:
        raise BodyMismatch(f"compression code {compression} is not one an Arrow body uses (none, lz4, zstd)")
    try:
        ipc_layout.check_layout(body, _LAYOUT, record_count, _CODECS[compression])
    except ipc_layout.LayoutError as e:
        raise BodyMismatch(str(e)) from None


# Up to this many records of bytes and int timestamps without headers (a broker's transaction
# markers and most coordinator records, a command's few ``produce()`` calls) are built from buffers
# (:mod:`broker.records.arrow_arrays`: pandas stays unloaded); more by ``pa.array``, whose C loop
# costs a producer's chunk of records several times less.
_FROM_BUFFERS_AT_MOST = 16


def record_batch(keys, values, timestamps, headers=None) -> pa.RecordBatch:
    """Build a ``SCHEMA`` batch from Python lists (None allowed in keys, values and headers)."""
    n = len(values)
    plain = headers is None or not any(headers)
    if plain and n <= _FROM_BUFFERS_AT_MOST and _bytes_or_none(keys) and _bytes_or_none(values) \
            and all(type(t) is int and -2**63 <= t < 2**63 for t in timestamps):
        return pa.RecordBatch.from_arrays(
            [arrow_arrays.binary(keys), arrow_arrays.binary(values), arrow_arrays.integers(timestamps),
             pa.nulls(n, HEADER_TYPE)], schema=SCHEMA)
    if plain:
        header_array = pa.nulls(n, HEADER_TYPE)
    else:
        header_array = pa.array([_normalise_headers(h) for h in headers], HEADER_TYPE)
    return pa.RecordBatch.from_arrays(
        [pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
         pa.array(timestamps, pa.int64()), header_array],
        schema=SCHEMA)


def _bytes_or_none(values) -> bool:
    return all(v is None or type(v) is bytes for v in values)


def _normalise_headers(headers):
    if not headers:
        return None
    items = headers.items() if isinstance(headers, dict) else headers
    return [(k, v.encode() if isinstance(v, str) else v) for k, v in items]


def encode_batch(batch: pa.RecordBatch, compression: str = "none", **header_fields) -> bytes:
    """A complete framed batch (header and Arrow body) ready to produce."""
    bounds = pc.min_max(batch.column(2))
    headers = batch.column(3)
    if headers.null_count == batch.num_rows and batch.num_rows:
        # A slice of an all-null list column would serialise its parent's whole child array.
        batch = batch.set_column(3, "headers", pa.nulls(batch.num_rows, HEADER_TYPE))
    body = encode_body(batch, compression)
    attributes = header_fields.pop("attributes", 0) | COMPRESSION_CODES[compression]
    return build_batch(body, record_count=batch.num_rows, magic=MAGIC_ARROW, attributes=attributes,
                       base_timestamp=bounds["min"].as_py(), max_timestamp=bounds["max"].as_py(),
                       **header_fields)


def timestamp_range(body, compression: int = COMPRESSION_NONE) -> tuple[int, int]:
    """(smallest, largest) record timestamp of a produced body that passed the layout check (its
    header's ``compression`` bits), -1 (no timestamp) included, as :func:`encode_batch` writes
    them into the batch header."""
    if compression != COMPRESSION_NONE:     # inflate the timestamps' buffer alone, not every column
        try:
            times = ipc_layout.fixed8_values(body, _LAYOUT, 2)
        except ipc_layout.LayoutError as e:
            from broker.errors import CorruptRecordError
            raise CorruptRecordError(f"a batch body's timestamps do not decode ({e})") from None
        if times is not None:
            return int(times.min()), int(times.max())
    bounds = pc.min_max(decode_produced(body).column(2))     # zero-copy uncompressed; skips nulls
    return bounds["min"].as_py(), bounds["max"].as_py()


def first_index_at_or_after(batch: bytes, timestamp: int, start: int = 0) -> tuple[int | None, int]:
    """Index and timestamp of the first record in a framed batch, at index ``start`` or later, with
    a timestamp >= ``timestamp``."""
    from broker.records.batch import HEADER_SIZE
    timestamps = decode_body(memoryview(batch)[HEADER_SIZE:]).column(2).slice(start)
    mask = pc.greater_equal(timestamps, timestamp)
    index = pc.index(mask, True).as_py()
    if index < 0:
        return None, -1
    return start + index, timestamps[index].as_py()


CODEC_NAMES = {"uncompressed": "none", "zstd": "zstd", "lz4": "lz4"}


def recompress(data, headers, compression: str) -> tuple[bytes, list]:
    """The framed batches ``data`` with every body in ``compression`` (a topic's
    ``compression.type``: uncompressed, zstd or lz4), and their new headers.

    A batch already in that codec keeps its bytes; another is decoded and encoded again, its header
    fields (producer, sequence, timestamps, attributes but the codec bits) kept and its CRC
    computed anew. Offsets are still the producer's (the leader assigns them after this).
    """
    from broker.records.batch import COMPRESSION_MASK, HEADER_SIZE, parse_header
    name = CODEC_NAMES[compression]
    code = COMPRESSION_CODES[name]
    if all(h.compression == code for h in headers):
        return data, headers
    view, pos, parts = memoryview(data), 0, []
    for h in headers:
        if h.compression == code:
            parts.append(view[pos: pos + h.size])
        else:
            body = encode_body(decode_produced(view[pos + HEADER_SIZE: pos + h.size]), name)
            parts.append(build_batch(
                body, record_count=h.record_count, base_timestamp=h.base_timestamp, max_timestamp=h.max_timestamp,
                magic=h.magic, attributes=(h.attributes & ~COMPRESSION_MASK) | code, base_offset=h.base_offset,
                producer_id=h.producer_id, producer_epoch=h.producer_epoch, base_sequence=h.base_sequence,
                partition_leader_epoch=h.partition_leader_epoch))
        pos += h.size
    out = b"".join(parts)
    new_headers, pos = [], 0
    while pos < len(out):
        new_headers.append(parse_header(out, pos))
        pos += new_headers[-1].size
    return out, new_headers
