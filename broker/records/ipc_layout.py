"""What an Arrow IPC record-batch message says about itself, read from its flatbuffer alone.

A batch body is one encapsulated IPC message::

    0  continuation   uint32 LE  0xFFFFFFFF
    4  metadata_size  int32 LE   bytes of flatbuffer ``Message`` that follow (padded to 8)
    8  metadata       flatbuffer Message { version: short, header_type: ubyte (3 = RecordBatch),
                                 header: RecordBatch, bodyLength: long, custom_metadata }
                      RecordBatch { length: long (rows), nodes: [FieldNode {length, null_count}],
                                    buffers: [Buffer {offset, length}],
                                    compression: BodyCompression {codec: byte, method: byte},
                                    variadicBufferCounts: [long] }
    8+metadata_size   body: the buffers at the offsets the metadata names

Flatbuffer tables are reached through little-endian uint32 offsets; a table starts with an int32
back-reference to its vtable (uint16 vtable size, uint16 table size, uint16 field offsets, 0 =
absent). Field nodes and buffers list the columns depth-first, so their count and sizes give the
schema's shape and the row count without touching a value. A compressed buffer starts with its
uncompressed length (int64 LE, -1 = stored uncompressed), so the sizes can be checked without
decompressing too.

This is what the broker checks on produce (:func:`check_layout`): cheap (tens of microseconds per
batch, independent of its size), and enough to refuse a body whose row count or schema disagrees
with the batch header. It cannot see inside the values (e.g. offsets that point outside their data
buffer), nor tell the fixed schema from another with the very same buffer layout (string for binary,
float64 for int64: such a body decodes as the fixed schema's bytes); the client validates values
fully when it decodes.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

import pyarrow as pa

_U16, _U32, _I32, _I64 = (struct.Struct(f) for f in ("<H", "<I", "<i", "<q"))
_PREFIX = 8
_RECORD_BATCH = 3
CODEC_LZ4_FRAME, CODEC_ZSTD = 0, 1
_CODEC_NAMES = {None: "none", CODEC_LZ4_FRAME: "lz4", CODEC_ZSTD: "zstd"}

# What each buffer of a column holds, by Arrow type; enough for the fixed schema's types.
VALIDITY, OFFSETS32, FIXED8 = "validity", "offsets32", "fixed8"


class LayoutError(ValueError):
    """The message's metadata disagrees with itself or with what it should describe."""


class Layout(NamedTuple):
    length: int                          # rows
    nodes: tuple[tuple[int, int], ...]   # (length, null_count) per field, depth-first
    buffers: tuple[tuple[int, int], ...]  # (offset, length) in the body
    codec: int | None                    # None: uncompressed
    body_length: int
    body_start: int                      # where the buffers start: after prefix and metadata


class Expected(NamedTuple):
    """The shape a schema gives a record-batch message."""
    node_count: int
    top_level: tuple[int, ...]              # node index of each top-level column
    buffer_kinds: tuple[tuple[int, str], ...]  # (node index, kind) per buffer
    same_length: tuple[tuple[int, int], ...]   # (parent, child) nodes that must have equal length


def expected_for(schema: pa.Schema) -> Expected:
    top, kinds, same = [], [], []

    def visit(dtype: pa.DataType) -> int:
        node = len(nodes)
        nodes.append(node)
        if pa.types.is_binary(dtype) or pa.types.is_string(dtype):
            kinds.extend([(node, VALIDITY), (node, OFFSETS32), (node, "data")])
        elif pa.types.is_int64(dtype) or pa.types.is_float64(dtype) or pa.types.is_timestamp(dtype):
            kinds.extend([(node, VALIDITY), (node, FIXED8)])
        elif pa.types.is_list(dtype):
            kinds.extend([(node, VALIDITY), (node, OFFSETS32)])
            visit(dtype.value_type)
        elif pa.types.is_struct(dtype):
            kinds.append((node, VALIDITY))
            for i in range(dtype.num_fields):
                same.append((node, visit(dtype.field(i).type)))
        else:
            raise TypeError(f"no IPC layout rule for {dtype}")
        return node

    nodes: list[int] = []
    for field in schema:
        top.append(visit(field.type))
    return Expected(len(nodes), tuple(top), tuple(kinds), tuple(same))


def _read(s: struct.Struct, buf, pos: int) -> int:
    if pos < 0 or pos + s.size > len(buf):
        raise LayoutError(f"flatbuffer reference to byte {pos} is outside the {len(buf)}-byte metadata")
    return s.unpack_from(buf, pos)[0]


class _Table:
    __slots__ = ("buf", "pos", "vtable", "vtable_size")

    def __init__(self, buf, pos: int):
        self.buf, self.pos = buf, pos
        self.vtable = pos - _read(_I32, buf, pos)
        self.vtable_size = _read(_U16, buf, self.vtable)

    def field(self, index: int) -> int | None:
        slot = 4 + 2 * index
        if slot + 2 > self.vtable_size:
            return None
        rel = _read(_U16, self.buf, self.vtable + slot)
        return self.pos + rel if rel else None

    def scalar(self, index: int, s: struct.Struct, default: int = 0) -> int:
        at = self.field(index)
        return default if at is None else _read(s, self.buf, at)

    def target(self, index: int) -> int | None:
        at = self.field(index)
        return None if at is None else at + _read(_U32, self.buf, at)

    def pairs(self, index: int) -> tuple[tuple[int, int], ...]:
        """A vector of 16-byte structs of two int64s."""
        at = self.target(index)
        if at is None:
            return ()
        n = _read(_U32, self.buf, at)
        if at + 4 + 16 * n > len(self.buf):
            raise LayoutError(f"a vector of {n} entries runs past the metadata")
        flat = struct.unpack_from(f"<{2 * n}q", self.buf, at + 4)
        return tuple(zip(flat[::2], flat[1::2]))


def read_layout(body) -> Layout:
    """The record-batch metadata of an encapsulated message (raises LayoutError)."""
    view = memoryview(body)
    if len(view) < _PREFIX or _read(_U32, view, 0) != 0xFFFFFFFF:
        raise LayoutError("body does not start with an IPC continuation marker")
    size = _read(_I32, view, 4)
    if size <= 0 or _PREFIX + size > len(view):
        raise LayoutError(f"metadata size {size} does not fit a {len(view)}-byte body")
    meta = view[_PREFIX:_PREFIX + size]
    message = _Table(meta, _read(_U32, meta, 0))
    kind = message.scalar(1, struct.Struct("<B"))
    if kind != _RECORD_BATCH:
        raise LayoutError(f"IPC message header type is {kind}, not a record batch")
    body_length = message.scalar(3, _I64)
    at = message.target(2)
    if at is None:
        raise LayoutError("IPC message has no record batch header")
    batch = _Table(meta, at)
    variadic = batch.target(4)
    if variadic is not None and _read(_U32, meta, variadic):
        raise LayoutError("record batch declares variadic buffers, which the schema has none of")
    compression = batch.target(3)
    codec = None if compression is None else _Table(meta, compression).scalar(0, struct.Struct("<b"))
    return Layout(batch.scalar(0, _I64), batch.pairs(1), batch.pairs(2), codec, body_length, _PREFIX + size)


def check_layout(body, expected: Expected, record_count: int, codec: int | None) -> None:
    """Raise LayoutError unless the message holds ``record_count`` rows shaped as ``expected``,
    with buffers inside the body and large enough for their rows, compressed with ``codec``."""
    layout = read_layout(body)
    if layout.length != record_count:
        raise LayoutError(f"header declares {record_count} records but the Arrow body holds {layout.length}")
    if len(layout.nodes) != expected.node_count or len(layout.buffers) != len(expected.buffer_kinds):
        raise LayoutError(
            f"Arrow body has {len(layout.nodes)} field nodes and {len(layout.buffers)} buffers; the batch "
            f"schema has {expected.node_count} and {len(expected.buffer_kinds)}"
            " (a body written with another schema)")
    if layout.codec != codec:
        raise LayoutError(f"Arrow body is compressed with {_CODEC_NAMES.get(layout.codec, layout.codec)} but "
                          f"the header's attributes say {_CODEC_NAMES.get(codec, codec)}")
    for column, node in enumerate(expected.top_level):
        if layout.nodes[node][0] != layout.length:
            raise LayoutError(f"column {column} has {layout.nodes[node][0]} rows, the batch {layout.length}")
    for parent, child in expected.same_length:
        if layout.nodes[parent][0] != layout.nodes[child][0]:
            raise LayoutError(f"struct field node {child} has {layout.nodes[child][0]} rows, its struct "
                              f"{layout.nodes[parent][0]}")
    for length, nulls in layout.nodes:
        if length < 0 or not 0 <= nulls <= length:
            raise LayoutError(f"field node with {length} rows and {nulls} nulls")
    _check_buffers(memoryview(body), layout, expected)


def fixed8_values(body, expected: Expected, column: int, layout: Layout | None = None):
    """The int64 values of top-level ``column`` (a fixed-width 8-byte column without nulls) of a
    message :func:`check_layout` accepted, as a NumPy array: only that buffer is read (and
    decompressed), so it costs microseconds where decoding the batch would inflate every column.
    None when the column has nulls (its values are not all defined)."""
    import numpy as np
    layout = layout or read_layout(body)
    node = expected.top_level[column]
    rows, nulls = layout.nodes[node]
    if nulls:
        return None
    index = next(i for i, (n, kind) in enumerate(expected.buffer_kinds) if n == node and kind == FIXED8)
    offset, length = layout.buffers[index]
    view = memoryview(body)[layout.body_start + offset: layout.body_start + offset + length]
    if layout.codec is not None and length:
        declared = _I64.unpack_from(view, 0)[0]
        if declared == -1:
            view = view[8:]
        elif not 8 * rows <= declared <= 8 * rows + 64:    # Arrow writes 8 * rows; a claim is allocated first
            raise LayoutError(f"a compressed {rows}-row int64 buffer declares {declared} bytes uncompressed")
        else:
            try:
                view = pa.decompress(view[8:], declared, codec=_CODEC_NAMES[layout.codec], asbytes=True)
            except (pa.ArrowException, OSError, ValueError) as e:
                raise LayoutError(f"a compressed int64 buffer does not inflate ({e})") from None
            if len(view) != declared:
                raise LayoutError(f"a compressed int64 buffer inflates to {len(view)} bytes, not {declared}")
    return np.frombuffer(view, dtype="<i8", count=rows)


def _check_buffers(view: memoryview, layout: Layout, expected: Expected) -> None:
    if layout.body_start + layout.body_length > len(view):
        raise LayoutError(f"message body of {layout.body_length} bytes runs past the batch")
    for (offset, length), (node, kind) in zip(layout.buffers, expected.buffer_kinds):
        if offset < 0 or length < 0 or offset + length > layout.body_length:
            raise LayoutError(f"buffer [{offset}, {offset + length}) lies outside the "
                              f"{layout.body_length}-byte message body")
        size = length
        if layout.codec is not None and length:
            if length < 8:
                raise LayoutError(f"compressed buffer of {length} bytes has no length prefix")
            declared = _I64.unpack_from(view, layout.body_start + offset)[0]
            size = length - 8 if declared == -1 else declared
        rows, nulls = layout.nodes[node]
        need = {VALIDITY: (rows + 7) // 8 if nulls else 0,
                OFFSETS32: 4 * (rows + 1) if rows else 0,
                FIXED8: 8 * rows}.get(kind, 0)
        if size < need:
            raise LayoutError(f"a {kind} buffer of a {rows}-row column holds {size} bytes; it needs {need}")
