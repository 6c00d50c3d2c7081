"""Turning fetched bytes back into records, vectorised.

A fetch returns whole batches, possibly starting before the offset asked for (a batch is never
split). :func:`decode_records` checks each batch (length and, when asked, CRC-32C), decodes the
Arrow body without copying, attaches offsets and skips records below ``start_offset``. Control
batches (transaction markers) carry no user records and are skipped.

For ``read_committed`` the fetch response names the aborted transactions the data overlaps, as
(producer id, first offset). As in Kafka's consumer, a producer joins the "aborted" set when the
data reaches such a first offset and leaves it at its next control batch (the abort marker); its
transactional batches in between are dropped.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pyarrow as pa

from broker.errors import CorruptRecordError
from broker.records.arrow_body import decode_body
from broker.records.batch import HEADER_SIZE, MAGIC_ARROW, compute_crc, iter_headers


class DecodedBatch(NamedTuple):
    base_offset: int           # offset of the first row of ``records``
    records: pa.RecordBatch    # key, value, timestamp, headers
    log_append_time: bool
    next_offset: int           # offset after the batch (the next fetch position)


def decode_records(data, start_offset: int, check_crcs: bool = True,
                   aborted: list[tuple[int, int]] | None = None) -> list[DecodedBatch]:
    view = memoryview(data)
    out: list[DecodedBatch] = []
    consumed = 0
    pending = sorted(aborted or (), key=lambda a: a[1])
    skipping: set[int] = set()
    for pos, header in iter_headers(view):
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
        if header.magic != MAGIC_ARROW:
            raise CorruptRecordError(f"batch at offset {header.base_offset} has unknown magic {header.magic}")
        if check_crcs and compute_crc(view, pos, header.size) != header.crc:
            raise CorruptRecordError(f"CRC-32C mismatch in batch at offset {header.base_offset}")
        records = decode_body(view[pos + HEADER_SIZE: pos + header.size])
        if records.num_rows != header.record_count:
            raise CorruptRecordError(
                f"batch at offset {header.base_offset} declares {header.record_count} records "
                f"but its body holds {records.num_rows}")
        skip = max(0, start_offset - header.base_offset)
        if skip:
            records = records.slice(skip)
        if header.is_log_append_time:
            records = records.set_column(2, "timestamp", pa.array(
                np.full(records.num_rows, header.max_timestamp, dtype=np.int64)))
        out.append(DecodedBatch(header.base_offset + skip, records, header.is_log_append_time,
                                header.next_offset))
    if consumed == 0 and len(view) >= HEADER_SIZE:
        raise CorruptRecordError("fetch response holds a partial batch only")
    return out
