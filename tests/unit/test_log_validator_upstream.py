"""The leader's produce validation against Kafka's ``LogValidator`` (and ``LogValidatorTest``):
record timestamps outside ``message.timestamp.before.max.ms`` / ``after.max.ms``, the producer
fields of an idempotent batch, control batches, LogAppendTime, and bodies that do not decode."""
from __future__ import annotations

import pytest

from broker.clock import ManualClock
from broker.errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError
from broker.partition import AppendNotifier, Partition
from broker.records import arrow_body
from broker.records.batch import compute_crc, stamp_producer, validate_batches
from broker.records.control import marker_batch
from broker.records.reader import decode_records
from tests.unit._logkit import open_log

NOW = 10_000_000
NO_TIMESTAMP = -1


def _leader(tmp_path, config: dict | None = None) -> Partition:
    clock = ManualClock(NOW)
    log = open_log(tmp_path, config or {}, clock)
    partition = Partition("t", 0, "id", log, AppendNotifier(), clock=clock)
    partition.make_leader(0, 0, [0], [0])
    return partition


def _batch(timestamps, compression: str = "none") -> bytes:
    n = len(timestamps)
    return arrow_body.encode_batch(arrow_body.record_batch([b"k"] * n, [b"v"] * n, timestamps), compression)


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_a_record_too_old_is_refused_beside_one_without_timestamp(tmp_path, compression):
    """Kafka checks every record's timestamp and skips only the records that have none (-1): a
    record without a timestamp does not let its batch's others past the bound."""
    partition = _leader(tmp_path, {"message.timestamp.before.max.ms": 60_000})
    with pytest.raises(InvalidTimestampError, match=r"Timestamp 1000 of message with offset 1 is out of range"):
        partition.append_records(_batch([NO_TIMESTAMP, 1000], compression))
    assert partition.log.log_end_offset == 0
    assert partition.append_records(_batch([NO_TIMESTAMP, NOW - 1000], compression)).last_offset == 1


def test_out_of_range_timestamp_is_refused_with_kafkas_message(tmp_path):
    """``LogValidator.validateTimestamp``: the record's timestamp, its offset in the request and the
    accepted range [now - before.max.ms, now + after.max.ms]."""
    partition = _leader(tmp_path, {"message.timestamp.before.max.ms": 60_000,
                                   "message.timestamp.after.max.ms": 5_000})
    payload = _batch([NOW, NOW]) + _batch([NOW, NOW + 5_001, NOW])
    with pytest.raises(InvalidTimestampError) as raised:
        partition.append_records(payload)
    assert (f"Timestamp {NOW + 5_001} of message with offset 3 is out of range. The timestamp should be "
            f"within [{NOW - 60_000}, {NOW + 5_000}] (message.timestamp.before.max.ms=60000, "
            "message.timestamp.after.max.ms=5000)") in str(raised.value)
    with pytest.raises(InvalidTimestampError, match=rf"Timestamp {NOW - 60_001} of message with offset 0 "):
        partition.append_records(_batch([NOW - 60_001]))
    assert partition.log.log_end_offset == 0
    # The bounds themselves are inside the range (Kafka compares with >).
    assert partition.append_records(_batch([NOW - 60_000, NOW + 5_000])).last_offset == 1


def test_bounds_do_not_apply_to_a_log_append_time_topic(tmp_path):
    """guard (already matched): Kafka checks the bounds only for CreateTime."""
    partition = _leader(tmp_path, {"message.timestamp.type": "LogAppendTime",
                                   "message.timestamp.before.max.ms": 60_000})
    assert partition.append_records(_batch([NO_TIMESTAMP, 1000])).last_offset == 1


@pytest.mark.parametrize("transactional", [False, True])
def test_a_batch_with_a_producer_id_needs_a_sequence(tmp_path, transactional):
    """``LogValidator.validateBatch``: a client's batch with a producer id and a negative base
    sequence is InvalidRecord; it may not start the producer's state here (a transactional one was
    stored with sequence -1, a plain one was refused as UnknownProducerId)."""
    partition = _leader(tmp_path)
    data = stamp_producer(_batch([NOW]), 7, 0, -1, transactional=transactional)
    with pytest.raises(InvalidRecordError, match=r"^Invalid sequence number -1 in record batch with producerId 7 "
                                                 r"in topic partition t-0$"):
        partition.append_records(data)
    assert partition.log.log_end_offset == 0
    assert partition.append_records(stamp_producer(_batch([NOW]), 7, 0, 0, transactional=transactional)).first_offset == 0


def test_a_produced_control_batch_is_refused(tmp_path):
    """guard (already matched): ``validateBatch``: "Clients are not allowed to write control
    records" (InvalidRecord); only the transaction coordinator writes markers."""
    partition = _leader(tmp_path)
    with pytest.raises(InvalidRecordError, match="control batches"):
        partition.append_records(marker_batch(7, 0, True, 0, NOW))
    assert partition.log.log_end_offset == 0


def test_log_append_time_gives_every_record_and_the_batch_the_append_time(tmp_path):
    """guard (already matched): ``LogValidatorTest.testLogAppendTime*``: the batch's max timestamp
    is the broker's time and every record reads back with it, whatever the producer set."""
    partition = _leader(tmp_path, {"message.timestamp.type": "LogAppendTime"})
    partition.append_records(_batch([1, NO_TIMESTAMP, 3], "lz4"))
    stored = bytes(partition.log.read(0, 1 << 20))
    (header,) = validate_batches(stored, max_batch_bytes=1 << 20)
    assert header.is_log_append_time and header.max_timestamp == NOW
    (decoded,) = decode_records(stored, 0)
    assert decoded.records.column(2).to_pylist() == [NOW] * 3


def _zstd_batch_that_does_not_inflate(timestamp: int) -> bytes:
    """A zstd batch whose framing, Arrow metadata and CRC hold but whose compressed bytes are damaged:
    the metadata-only produce check passes it; only decompressing shows the damage."""
    n = 50
    data = bytearray(_batch([timestamp] * n, "zstd"))
    for i in range(len(data) - 40, len(data) - 20):
        data[i] ^= 0x5A
    data[17:21] = compute_crc(memoryview(data), 0, len(data)).to_bytes(4, "big")
    validate_batches(bytes(data), max_batch_bytes=1 << 20)
    return bytes(data)


@pytest.mark.parametrize("config", [{"compression.type": "lz4"}, {"cleanup.policy": "compact"},
                                    {"message.timestamp.before.max.ms": 1000}])
def test_a_body_the_leader_must_read_but_cannot_is_corrupt(tmp_path, config):
    """Recompression (``compression.type``), the keys of a compacted topic and an out-of-range
    timestamp make the leader decode a body: one that does not decompress is CorruptRecord (Kafka's
    CORRUPT_MESSAGE), not an untyped error the client sees as UnknownServerError."""
    partition = _leader(tmp_path, config)
    # (a record too old makes the leader read the body to name it)
    data = _zstd_batch_that_does_not_inflate(1 if "message.timestamp.before.max.ms" in config else NOW)
    with pytest.raises(CorruptRecordError, match="does not decode"):
        partition.append_records(data)
    assert partition.log.log_end_offset == 0
