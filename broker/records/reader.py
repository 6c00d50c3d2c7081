"""Turning fetched bytes back into records, vectorised.

A fetch returns whole batches, possibly starting before the offset asked for (a batch is never
split). :func:`decode_available` checks each batch (length and, when asked, CRC-32C), decodes the
Arrow body without copying, validates it fully (the broker reads only its metadata, so values such
as offsets are checked here, before anything reads them), attaches offsets and skips records below
``start_offset``. Control batches (transaction markers) carry no user records and are skipped.
A record's offset is its batch's base offset plus its row; a batch the log cleaner rewrote may
reach past its last record, or hold none (then its ``DecodedBatch`` has no row), and the next fetch
goes on after its last offset (``DecodedBatch.next_offset``, :func:`next_fetch_offset`).

A batch that fails stops decoding there: the batches before it are returned together with a
:class:`DecodeFailure` naming its offsets, so a consumer can hand over the good records, report the
bad batch at its offset and stay there (it never moves past what it did not deliver).

For ``read_committed`` the fetch response names the aborted transactions the data overlaps, as
(producer id, first offset). As in Kafka's consumer, a producer joins the "aborted" set when the
data reaches such a first offset and leaves it at its next control batch (the abort marker); its
transactional batches in between are dropped.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

import pyarrow as pa

from broker.errors import CorruptRecordError
from broker.records import arrow_arrays
from broker.records.arrow_body import decode_checked
from broker.records.batch import HEADER_SIZE, MAGIC_ARROW, BatchHeader, compute_crc, parse_header


class DecodedBatch(NamedTuple):
    base_offset: int           # offset of the first row of ``records``
    records: pa.RecordBatch    # key, value, timestamp, headers
    log_append_time: bool
    next_offset: int           # offset after the batch (the next fetch position)


class DecodeFailure(NamedTuple):
    """The first batch that could not be decoded."""
    offset: int                # its base offset (from its header)
    next_offset: int | None    # the offset after it, when its header could be read
    error: CorruptRecordError  # what was wrong; details carry both offsets


def decode_records(data, start_offset: int, check_crcs: bool = True,
                   aborted: list[tuple[int, int]] | None = None) -> list[DecodedBatch]:
    """Every batch in ``data``; raises CorruptRecordError at the first that fails."""
    out, failure = decode_available(data, start_offset, check_crcs, aborted)
    if failure is not None:
        raise failure.error
    return out


def _headers(view):
    """(position, header) of each complete batch; a DecodeFailure in place of an unreadable header."""
    pos = 0
    while len(view) - pos >= HEADER_SIZE:
        try:
            header = parse_header(view, pos)
        except CorruptRecordError as e:
            offset = struct.unpack_from(">q", view, pos)[0]
            yield pos, _failure(offset, None, f"batch at offset {offset}: {e}")
            return
        if pos + header.size > len(view):
            return
        yield pos, header
        pos += header.size


def _failure(offset: int, next_offset: int | None, message: str) -> DecodeFailure:
    return DecodeFailure(offset, next_offset, CorruptRecordError(
        message + ("" if next_offset is None else f"; seek to {next_offset} to skip it"),
        offset=offset, next_offset=next_offset))


def _decode_one(view, pos: int, header: BatchHeader, check_crcs: bool):
    """The records of one batch, or a DecodeFailure."""
    at = header.base_offset
    if header.magic != MAGIC_ARROW:
        return _failure(at, header.next_offset, f"batch at offset {at} has unknown magic {header.magic}")
    if check_crcs and compute_crc(view, pos, header.size) != header.crc:
        return _failure(at, header.next_offset, f"CRC-32C mismatch in batch at offset {at}")
    try:
        return decode_checked(view[pos + HEADER_SIZE: pos + header.size], header.record_count)
    except Exception as e:  # noqa: BLE001 - untrusted bytes: whatever the decoder raises is corruption
        return _failure(at, header.next_offset, f"batch at offset {at} (records {at}..{header.last_offset}): {e}")


def decode_available(data, start_offset: int, check_crcs: bool = True,
                     aborted: list[tuple[int, int]] | None = None
                     ) -> tuple[list[DecodedBatch], DecodeFailure | None]:
    """The batches in ``data`` up to the first that cannot be decoded, and that failure (or None)."""
    view = memoryview(data)
    out: list[DecodedBatch] = []
    consumed = 0
    pending = sorted(aborted or (), key=lambda a: a[1])
    skipping: set[int] = set()
    for pos, header in _headers(view):
        if isinstance(header, DecodeFailure):
            return out, header
        consumed = pos + header.size
        if pending or skipping:
            while pending and pending[0][1] <= header.last_offset:
                skipping.add(pending.pop(0)[0])
            if header.is_control:
                skipping.discard(header.producer_id)
                continue
            if header.is_transactional and header.producer_id in skipping:
                continue
        if header.last_offset < start_offset or header.is_control:
            continue
        records = _decode_one(view, pos, header, check_crcs)
        if isinstance(records, DecodeFailure):
            return out, records
        skip = max(0, start_offset - header.base_offset)
        if skip:
            records = records.slice(skip)
        if header.is_log_append_time:
            records = records.set_column(2, "timestamp", arrow_arrays.full(records.num_rows, header.max_timestamp))
        out.append(DecodedBatch(header.base_offset + skip, records, header.is_log_append_time,
                                header.next_offset))
    if consumed == 0 and len(view) >= HEADER_SIZE:
        offset = struct.unpack_from(">q", view, 0)[0]
        return out, _failure(offset, None, f"fetch response holds a partial batch only (at offset {offset})")
    return out, None


def next_fetch_offset(data) -> int | None:
    """The offset after the last complete, readable batch header in ``data`` (None: no such batch)."""
    following = None
    for _, header in _headers(memoryview(data)):
        if isinstance(header, DecodeFailure):
            break
        following = header.next_offset
    return following


def batch_epochs(data) -> dict[int, int]:
    """Each complete batch's partition leader epoch by the offset after it, control and aborted
    batches included (a consumer position's epoch, KIP-320); stops where :func:`next_fetch_offset`
    stops."""
    out = {}
    for _, header in _headers(memoryview(data)):
        if isinstance(header, DecodeFailure):
            break
        out[header.next_offset] = header.partition_leader_epoch
    return out
