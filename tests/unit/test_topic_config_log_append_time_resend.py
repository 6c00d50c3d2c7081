"""``message.timestamp.type=LogAppendTime`` and an idempotent producer's resend: the leader answers
a batch it already holds with the append time it stamped, as Kafka answers a duplicate
(``UnifiedLog.append``: ``setLogAppendTime(duplicate.timestamp)``), so a retried send's delivery
report names the timestamp the record was stored with."""
from __future__ import annotations

from broker.clock import ManualClock
from broker.partition import AppendNotifier, Partition
from broker.records import arrow_body
from broker.records.batch import stamp_producer
from broker.records.reader import decode_records
from tests.unit._logkit import open_log

NOW = 10_000_000
PRODUCER_TS = 1234


def _leader(tmp_path, config: dict, clock: ManualClock) -> Partition:
    partition = Partition("t", 0, "id", open_log(tmp_path, config, clock), AppendNotifier(), clock=clock)
    partition.make_leader(0, 0, [0], [0])
    return partition


def _idempotent_batch(sequence: int) -> bytes:
    data = arrow_body.encode_batch(arrow_body.record_batch([b"k"], [b"v"], [PRODUCER_TS]))
    return stamp_producer(data, 7, 0, sequence)


def test_a_resent_batch_is_answered_with_the_time_it_was_stamped(tmp_path):
    clock = ManualClock(NOW)
    partition = _leader(tmp_path, {"message.timestamp.type": "LogAppendTime"}, clock)
    first = partition.append_records(_idempotent_batch(0))
    assert first.log_append_time == NOW

    clock.advance(5000)   # the response was lost; the producer sends the same batch again
    resent = partition.append_records(_idempotent_batch(0))
    assert (resent.first_offset, resent.last_offset, resent.log_append_time) == (0, 0, NOW)
    assert partition.log.log_end_offset == 1
    stored = decode_records(partition.log.read(0, 1 << 20), 0)
    assert stored[0].log_append_time and stored[0].records.column(2).to_pylist() == [NOW]


def test_a_resent_batch_on_a_create_time_topic_has_no_log_append_time(tmp_path):
    """guard: on CreateTime the answer stays -1, so the client keeps reporting the producer's time
    as a CreateTime."""
    clock = ManualClock(NOW)
    partition = _leader(tmp_path, {}, clock)
    assert partition.append_records(_idempotent_batch(0)).log_append_time == -1
    clock.advance(5000)
    resent = partition.append_records(_idempotent_batch(0))
    assert (resent.first_offset, resent.log_append_time) == (0, -1)
