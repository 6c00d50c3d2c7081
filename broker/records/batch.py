"""Record batches: Kafka's RecordBatch v2 header in front of a body named by ``magic``.

Byte layout (big-endian, 61-byte header, as Kafka's v2 batch)::

    0  base_offset             int64   rewritten by the leader when it assigns offsets
    8  batch_length            int32   bytes that follow this field (header rest + body)
    12 partition_leader_epoch  int32   rewritten by the leader
    16 magic                   int8    body format: MAGIC_ARROW (Arrow IPC) or Kafka's 2 (reserved)
    17 crc                     uint32  CRC-32C of bytes [21, end)
    21 attributes              int16   bits 0-2 compression, 3 timestamp type, 4 transactional,
                                       5 control, 6 delete horizon set
    23 last_offset_delta       int32   record_count - 1 for batches a producer writes
    27 base_timestamp          int64   ms: the smallest record timestamp, or the delete horizon when
                                       attribute bit 6 is set
    35 max_timestamp           int64   ms (the log-append time when the topic says LogAppendTime)
    43 producer_id             int64   -1 when not idempotent
    51 producer_epoch          int16
    53 base_sequence           int32
    57 record_count            int32
    61 body                    bytes   one Arrow IPC record-batch message when magic == MAGIC_ARROW

**Delete horizon** (Kafka's ``DefaultRecordBatch.deleteHorizonMs``, KIP-534): the log cleaner sets
attribute bit 6 on a batch it rewrites that keeps a tombstone or a removable transaction marker, and
stores in ``base_timestamp`` the time from which a later clean may remove them (see
``broker.storage.cleaner``). Records carry their own absolute timestamps in the body, and
``max_timestamp`` is untouched, so time-based retention, the time index and lookups by timestamp
see the same record times as before; nothing reads ``base_timestamp`` of a stored batch otherwise.
Batches written before the bit existed simply have no horizon yet.

Because the CRC starts at ``attributes``, assigning offsets and the leader epoch never touches the
body or the checksum: the broker stores and serves batches as opaque bytes and reads only this
header. A batch whose length or CRC does not hold is corrupt; storage truncates a log at the first
such batch after a crash, and readers refuse to serve it.
"""
from __future__ import annotations

import struct
from typing import Iterator, NamedTuple

from crc32c import crc32c

from broker.errors import (CorruptRecordError, InvalidRecordError, MessageTooLargeError,
                           UnsupportedVersionError)

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
CRC_START = 21
LENGTH_OFFSET = 8
LOG_OVERHEAD = 12  # base_offset + batch_length: bytes not counted in batch_length
_PREFIX = struct.Struct(">qii")  # base_offset, batch_length, partition_leader_epoch
_TAIL = struct.Struct(">hiqqqhii")  # attributes .. record_count, the CRC-covered header part
_BASE_TIMESTAMP_OFFSET = 27

MAGIC_KAFKA_V2 = 2
MAGIC_ARROW = 64

COMPRESSION_NONE, COMPRESSION_GZIP, COMPRESSION_SNAPPY, COMPRESSION_LZ4, COMPRESSION_ZSTD = range(5)
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_LOG_APPEND = 0x08
TRANSACTIONAL = 0x10
CONTROL = 0x20
DELETE_HORIZON = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
MAX_SEQUENCE = 2**31 - 1
NO_PARTITION_LEADER_EPOCH = -1


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment`` in the int32 sequence space, which wraps from ``MAX_SEQUENCE`` to 0
    (Kafka's ``DefaultRecordBatch.incrementSequence``): a long-lived producer never runs out."""
    return (sequence + increment) % (MAX_SEQUENCE + 1)


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies (header and body)."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_LOG_APPEND)

    @property
    def last_sequence(self) -> int:
        """The sequence of the batch's last record (it wraps past ``MAX_SEQUENCE``)."""
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL)

    @property
    def delete_horizon_ms(self) -> int | None:
        """When the cleaner may remove this batch's tombstones or marker; None until a clean set it
        (Kafka's ``RecordBatch.deleteHorizonMs``)."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON else None


def parse_header(buf, pos: int = 0) -> BatchHeader:
    """Decode the fixed header at ``pos``; raises CorruptRecordError if it does not fit."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(f"truncated batch header at byte {pos}")
    header = BatchHeader._make(HEADER.unpack_from(buf, pos))
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(f"batch at byte {pos} declares impossible length {header.batch_length}")
    return header


def build_batch(body, *, record_count: int, base_timestamp: int, max_timestamp: int,
                magic: int = MAGIC_ARROW, attributes: int = 0, base_offset: int = 0,
                producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH,
                base_sequence: int = NO_SEQUENCE,
                partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
                last_offset_delta: int | None = None) -> bytes:
    """Frame ``body`` as one batch with its CRC; offsets start at 0 until the leader assigns them.
    ``last_offset_delta`` (default ``record_count - 1``) is larger only in a batch the log cleaner
    rewrote: it keeps the original batch's last offset, and so its last sequence number."""
    delta = record_count - 1 if last_offset_delta is None else last_offset_delta
    tail = _TAIL.pack(attributes, delta, base_timestamp, max_timestamp, producer_id,
                      producer_epoch, base_sequence, record_count)
    crc = crc32c(body, crc32c(tail))
    length = HEADER_SIZE - LOG_OVERHEAD + len(body)
    head = _PREFIX.pack(base_offset, length, partition_leader_epoch) + bytes((magic,)) + crc.to_bytes(4, "big")
    return b"".join((head, tail, body))


def compute_crc(buf, pos: int, size: int) -> int:
    return crc32c(memoryview(buf)[pos + CRC_START: pos + size])


def iter_headers(buf, start: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) of each complete batch in ``buf[start:end]``; stop at a partial one.

    Does not verify checksums: the reader's fast path. Raises CorruptRecordError on a header
    whose length field is impossible.
    """
    end = len(buf) if end is None else end
    pos = start
    while end - pos >= HEADER_SIZE:
        header = parse_header(buf, pos)
        if pos + header.size > end:
            return
        yield pos, header
        pos += header.size


def validate_batches(data, *, max_batch_bytes: int, replicated: bool = False) -> list[BatchHeader]:
    """Check a produce payload without decoding records; return the headers in order.

    Every batch must be complete, carry a known magic, match its CRC, count at least one record
    with consistent offset deltas (``replicated``: batches a follower copies from its leader's
    log, where the cleaner may have left fewer records than offsets, or none, see
    :func:`is_compacted_shape`), have a producer id if it is transactional, be at most
    ``max_batch_bytes`` and have a body that is framed as one Arrow IPC record-batch message
    whose metadata declares the header's record count, the fixed schema's shape and the header's
    compression. Nothing about the payload is trusted before this; the body's values are not read
    (that is the consumer's :func:`decode_checked`).
    """
    view = memoryview(data)
    headers: list[BatchHeader] = []
    pos = 0
    if len(view) == 0:
        raise InvalidRecordError("produce request carries no record batch")
    while pos < len(view):
        header = parse_header(view, pos)
        if pos + header.size > len(view):
            raise CorruptRecordError(
                f"batch at byte {pos} declares {header.size} bytes but only {len(view) - pos} were sent")
        if header.size > max_batch_bytes:
            raise MessageTooLargeError(
                f"batch of {header.size} bytes exceeds max.message.bytes={max_batch_bytes}",
                batch_bytes=header.size, max_message_bytes=max_batch_bytes)
        if header.magic != MAGIC_ARROW:
            raise UnsupportedVersionError(
                f"record batch magic {header.magic} is not supported; this broker stores magic {MAGIC_ARROW}")
        if compute_crc(view, pos, header.size) != header.crc:
            raise CorruptRecordError(f"CRC-32C mismatch in batch at byte {pos}")
        if not (is_compacted_shape(header) if replicated
                else header.record_count >= 1 and header.last_offset_delta == header.record_count - 1):
            raise InvalidRecordError(
                f"batch at byte {pos} has record_count={header.record_count} and "
                f"last_offset_delta={header.last_offset_delta}; a batch holds at least one record and "
                "its last offset delta is record_count - 1")
        if header.is_transactional and header.producer_id < 0:
            raise InvalidRecordError(
                f"batch at byte {pos} is marked transactional but has no producer id "
                f"(producer_id={header.producer_id}); transactional batches come from a producer that "
                "called init_transactions()")
        _check_body(view[pos + HEADER_SIZE: pos + header.size], header, pos)
        headers.append(header)
        pos += header.size
    return headers


def is_compacted_shape(header: BatchHeader) -> bool:
    """A stored batch's record count and offset range agree: its records sit at offsets
    ``base_offset ..`` (positional) and its last offset may lie past the last of them, or it may
    hold no record at all, as a batch the log cleaner rewrote (Kafka's ``overrideLastOffset`` and
    ``writeEmptyHeader``: the producer's last sequence number outlives its records)."""
    return 0 <= header.record_count <= header.last_offset_delta + 1


def _check_body(body: memoryview, header: BatchHeader, pos: int) -> None:
    """The body is one Arrow record-batch message (else InvalidRecord) holding the header's record
    count in the fixed schema's shape with the header's compression (else CorruptRecord: header and
    body disagree). Reads the message's flatbuffer metadata only."""
    # Imported lazily so storage-only users do not pay for pyarrow at import time.
    from broker.records.arrow_body import BodyMismatch, check_framing
    try:
        check_framing(body, header.record_count, header.compression)
    except BodyMismatch as e:
        raise CorruptRecordError(f"batch at byte {pos}: {e}") from None
    except ValueError as e:
        raise InvalidRecordError(f"batch at byte {pos}: body is not an Arrow record batch ({e})") from None


def with_offsets(data, headers: list[BatchHeader], first_offset: int, leader_epoch: int) -> list:
    """Buffers that spell ``data`` with base offsets from ``first_offset`` and the leader epoch.

    Returns a list of buffers for ``os.writev`` so the body bytes are never copied.
    """
    view = memoryview(data)
    parts = []
    pos = 0
    offset = first_offset
    for h in headers:
        parts.append(_PREFIX.pack(offset, h.batch_length, leader_epoch))
        parts.append(view[pos + 16: pos + h.size])
        offset += h.last_offset_delta + 1
        pos += h.size
    return parts


def stamp_log_append_time(data, headers: list[BatchHeader], timestamp: int) -> bytes:
    """Rewrite each batch's max timestamp to ``timestamp`` and set the LogAppendTime bit.

    The CRC covers these fields, so each batch is re-checksummed (as Kafka does for this topic
    setting); the body is untouched.
    """
    out = bytearray(data)
    pos = 0
    for h in headers:
        attributes = h.attributes | TIMESTAMP_TYPE_LOG_APPEND
        struct.pack_into(">h", out, pos + CRC_START, attributes)
        struct.pack_into(">q", out, pos + 35, timestamp)
        struct.pack_into(">I", out, pos + 17, compute_crc(out, pos, h.size))
        pos += h.size
    return bytes(out)


def with_timestamp_ranges(data, headers: list[BatchHeader], ranges: list[tuple[int, int]]
                          ) -> tuple[bytes, list[BatchHeader]]:
    """The batches ``data`` with each header's base and max timestamps set to ``ranges`` (its
    records' smallest and largest), re-checksummed where they changed; the bodies untouched.

    Kafka's ``LogValidator`` computes a produced batch's max timestamp from its records and sets
    it when the producer's differs: the header drives the time index, time-based retention and
    rolling, and lookups by time, so a producer's claim is not taken for what its records say."""
    out, fixed, pos = bytearray(data), [], 0
    for h, (low, high) in zip(headers, ranges):
        if (h.base_timestamp, h.max_timestamp) != (low, high):
            struct.pack_into(">q", out, pos + _BASE_TIMESTAMP_OFFSET, low)
            struct.pack_into(">q", out, pos + 35, high)
            crc = compute_crc(out, pos, h.size)
            struct.pack_into(">I", out, pos + 17, crc)
            h = h._replace(base_timestamp=low, max_timestamp=high, crc=crc)
        fixed.append(h)
        pos += h.size
    return bytes(out), fixed


def stamp_delete_horizon(batch, horizon_ms: int) -> bytes:
    """The framed batch ``batch`` with the delete-horizon attribute set and ``horizon_ms`` in its
    base timestamp (the CRC, which covers both, computed again); the body is untouched, so the
    records keep their timestamps."""
    buf = bytearray(batch)
    attributes = struct.unpack_from(">h", buf, CRC_START)[0]
    struct.pack_into(">h", buf, CRC_START, attributes | DELETE_HORIZON)
    struct.pack_into(">q", buf, _BASE_TIMESTAMP_OFFSET, horizon_ms)
    struct.pack_into(">I", buf, 17, compute_crc(buf, 0, len(buf)))
    return bytes(buf)


# How many of a producer's latest batches a partition remembers (per producer id), and therefore
# how many batches of one partition an idempotent producer may have unanswered: a batch resent
# after a broken connection or a broker restart is recognised as written only while it is one of
# them. Kafka remembers 5 with at most one batch per partition in a request; a Riverlog request
# carries several batches of a partition, so the window is wider.
IDEMPOTENCE_WINDOW = 32

_PRODUCER_FIELDS = struct.Struct(">qhi")  # producer_id, producer_epoch, base_sequence at offset 43
_PRODUCER_OFFSET = 43


def stamp_producer(data, producer_id: int, producer_epoch: int, base_sequence: int,
                   transactional: bool = False) -> bytes:
    """The framed batch ``data`` with its producer id, epoch and first sequence set (and the
    transactional attribute); the CRC, which covers them, is computed again."""
    buf = bytearray(data)
    _PRODUCER_FIELDS.pack_into(buf, _PRODUCER_OFFSET, producer_id, producer_epoch, base_sequence)
    if transactional:
        attributes = struct.unpack_from(">h", buf, CRC_START)[0]
        struct.pack_into(">h", buf, CRC_START, attributes | TRANSACTIONAL)
    struct.pack_into(">I", buf, 17, compute_crc(buf, 0, len(buf)))
    return bytes(buf)
