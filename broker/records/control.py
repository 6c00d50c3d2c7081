"""Transaction markers: the control batches that end a transaction in a partition.

As Kafka's: a batch with the control and transactional attributes, the producer's id and epoch,
no sequence, and one record whose key is ``(version int16, type int16)`` — type 0 aborts, 1
commits — and whose value is ``(version int16, coordinator epoch int32)``. Readers skip control
batches; ``read_committed`` readers use them to know where an aborted transaction ends.

The coordinator epoch is the leader epoch of the ``__transaction_state`` partition whose leader
wrote the marker (Kafka's ``EndTransactionMarker.coordinatorEpoch``): a partition refuses a marker
older than the last one it holds from the same producer, so a deposed coordinator cannot end a
transaction its successor already ended (:mod:`broker.storage.producer_state`).
"""
from __future__ import annotations

import struct

from broker.records.arrow_body import decode_body, encode_batch, record_batch
from broker.records.batch import CONTROL, HEADER_SIZE, TRANSACTIONAL

ABORT, COMMIT = 0, 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


def marker_batch(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                 timestamp: int) -> bytes:
    key = _KEY.pack(0, COMMIT if commit else ABORT)
    value = _VALUE.pack(0, coordinator_epoch)
    return encode_batch(record_batch([key], [value], [timestamp]), attributes=CONTROL | TRANSACTIONAL,
                        producer_id=producer_id, producer_epoch=producer_epoch)


def marker_type(batch: bytes) -> int:
    """ABORT or COMMIT, from a whole framed control batch."""
    return read_marker(batch)[0]


def read_marker(batch: bytes) -> tuple[int, int]:
    """(ABORT or COMMIT, coordinator epoch) from a whole framed control batch; the epoch is -1
    when the record has no value."""
    body = decode_body(memoryview(batch)[HEADER_SIZE:])
    value = body.column(1)[0].as_py()
    return _KEY.unpack(body.column(0)[0].as_py())[1], -1 if value is None else _VALUE.unpack(value)[1]
