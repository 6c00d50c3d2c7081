"""Log management on a real broker process, checked against Kafka's rules: retention set in the
broker's hours/minutes and altered on a running partition, and ListOffsets answers (by time with
timestamps out of order across batches, MAX_TIMESTAMP, read_committed capped at the LSO)."""
from __future__ import annotations

import time

import pytest

from broker.client import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, Consumer, IsolationLevel,
                           NewTopic, OffsetSpec, Producer, ResourceType, TopicPartition)
from tests.conftest import BrokerProcess, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

QUICK = {"log.retention.check.interval.ms": 100}
HOUR = 3_600_000


@pytest.fixture
def broker_retaining_30_minutes(tmp_path):
    """A broker whose topics default to its ``log.retention.minutes`` (the fixtures' broker-wide
    ``log.retention.ms=-1`` would win over it, as in Kafka, so it is left out here)."""
    broker = BrokerProcess(str(tmp_path / "broker"), {**QUICK, "log.retention.minutes": 30})
    del broker.configs["log.retention.ms"]
    try:
        yield broker.start()
    finally:
        broker.kill9()


def _produce(bootstrap: str, topic: str, timestamps: list[int]) -> None:
    """One batch per record, so every record carries its own batch max timestamp."""
    with Producer({"bootstrap.servers": bootstrap, "linger.ms": 0}) as p:
        for i, ts in enumerate(timestamps):
            p.produce(topic, value=b"r%d-" % i + b"x" * 200, partition=0, timestamp=ts)
            assert p.flush(30) == 0


def _offset(admin: AdminClient, tp: TopicPartition, spec: OffsetSpec,
            level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED) -> tuple[int, int]:
    found = admin.list_offsets({tp: spec}, isolation_level=level)[tp].result(10)
    return found.offset, found.timestamp


def test_retention_from_the_brokers_minutes_and_altered_on_a_running_partition(broker_retaining_30_minutes,
                                                                                topic_name):
    """KafkaConfig.logRetentionTimeMillis: a broker's log.retention.minutes is every topic's default
    retention.ms; altering retention.ms later applies at the next retention check, and once all
    records expired the active segment is rolled and removed too (UnifiedLog.deletableSegments)."""
    broker = broker_retaining_30_minutes
    tp = TopicPartition(topic_name, 0)
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1, {"segment.bytes": "2000"})])[topic_name].result(30)
        now = int(time.time() * 1000)
        _produce(broker.bootstrap, topic_name, [now - 2 * HOUR] * 40 + [now] * 10)

        # Segments holding only the two-hour-old records go; the one holding offset 40 stays.
        wait_until(lambda: 0 < _offset(admin, tp, OffsetSpec.earliest())[0], 20, 0.05,
                   "retention to remove the segments older than log.retention.minutes")
        earliest = _offset(admin, tp, OffsetSpec.earliest())[0]
        assert earliest <= 40
        assert _offset(admin, tp, OffsetSpec.for_timestamp(now - HOUR)) == (40, now)

        r = ConfigResource(ResourceType.TOPIC, topic_name, incremental_configs=[
            ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([r])[r].result(30)
        wait_until(lambda: _offset(admin, tp, OffsetSpec.earliest())[0] == 50, 20, 0.05,
                   "the altered retention.ms to remove every segment, the active one included")
        assert _offset(admin, tp, OffsetSpec.latest())[0] == 50
        assert _offset(admin, tp, OffsetSpec.for_timestamp(0)) == (-1, -1)


def test_list_offsets_by_time_with_timestamps_out_of_order_and_read_committed(broker_factory, topic_name):
    """UnifiedLog.fetchOffsetByTimestamp: the first offset whose timestamp is >= the target, even
    when an earlier batch holds a larger one; MAX_TIMESTAMP the first record holding the largest;
    with READ_COMMITTED an answer at or past the last stable offset is no answer (-1)."""
    broker = broker_factory()
    tp = TopicPartition(topic_name, 0)
    base = int(time.time() * 1000) - HOUR
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic_name, 1, 1, {"segment.bytes": "1000"})])[topic_name].result(30)
        _produce(broker.bootstrap, topic_name, [base + t for t in (1000, 5000, 2000, 3000, 9000, 2000, 9000)])
        for target, expected in ((0, (0, 1000)), (1500, (1, 5000)), (4000, (1, 5000)), (5001, (4, 9000)),
                                 (9001, (-1, -1))):
            assert _offset(admin, tp, OffsetSpec.for_timestamp(base + target)) == \
                (expected[0], expected[1] + base if expected[1] >= 0 else -1), target
        assert _offset(admin, tp, OffsetSpec.max_timestamp()) == (4, base + 9000)
        admin.delete_records([TopicPartition(topic_name, 0, 1)])[TopicPartition(topic_name, 0, 1)].result(30)
        # KIP-405's EARLIEST_LOCAL (-4) and LATEST_TIERED (-5) without tiered storage: the log
        # start, and -1 (UnifiedLog.fetchOffsetByTimestamp); both used to be INVALID_REQUEST
        assert _offset(admin, tp, OffsetSpec(-4))[0] == 1 and _offset(admin, tp, OffsetSpec(-5))[0] == -1

        txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": topic_name, "linger.ms": 0})
        try:
            txn.init_transactions(30)
            txn.begin_transaction()
            txn.produce(topic_name, value=b"open", partition=0, timestamp=base + 20_000)
            assert txn.flush(30) == 0
            committed = IsolationLevel.READ_COMMITTED
            assert _offset(admin, tp, OffsetSpec.latest(), committed)[0] == 7
            assert _offset(admin, tp, OffsetSpec.latest())[0] == 8
            assert _offset(admin, tp, OffsetSpec.for_timestamp(base + 10_000), committed) == (-1, -1)
            assert _offset(admin, tp, OffsetSpec.for_timestamp(base + 10_000)) == (7, base + 20_000)
            assert _offset(admin, tp, OffsetSpec.max_timestamp(), committed) == (-1, -1)
            txn.commit_transaction(30)
        finally:
            txn.close()
        # The commit marker's batch carries the broker's clock, later than every record: as in
        # Kafka (no control batch is skipped), it is the max-timestamp answer once it is stable.
        marker_offset, marker_ts = _offset(admin, tp, OffsetSpec.max_timestamp(), IsolationLevel.READ_COMMITTED)
        assert marker_offset == 8 and marker_ts > base + 20_000
        assert _offset(admin, tp, OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)[0] == 9
        assert _offset(admin, tp, OffsetSpec.for_timestamp(base + 10_000), IsolationLevel.READ_COMMITTED) == \
            (7, base + 20_000)

    consumer = Consumer({"bootstrap.servers": broker.bootstrap})
    try:   # confluent-kafka's offsets_for_times: the offset per partition, -1 when none is that late
        found = consumer.offsets_for_times([TopicPartition(topic_name, 0, base + 4000),
                                            TopicPartition(topic_name, 0, marker_ts + 1)], 10)
        assert [f.offset for f in found] == [1, -1]
    finally:
        consumer.close()
