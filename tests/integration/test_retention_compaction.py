"""Retention, DeleteRecords and log compaction in real broker processes."""
from __future__ import annotations

import glob
import os
import time

import pytest

from broker.client import OFFSET_BEGINNING, AdminClient, Consumer, NewTopic, Producer, TopicPartition
from broker.errors import InvalidRecordError, OffsetOutOfRangeError, PolicyViolationError, RiverlogError
from broker.records.reader import decode_records
from tests.conftest import wait_until
from tests.integration.test_cli import run_cli
from tests.integration.test_cluster import FAST, Acked, create

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

QUICK = {"log.retention.check.interval.ms": 100, "log.cleaner.backoff.ms": 100}


def create_topic(bootstrap: str, name: str, **configs) -> None:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(name, 1, 1, {k.replace("_", "."): str(v) for k, v in configs.items()})])[
            name].result(30)


def produce(bootstrap: str, topic: str, records, acks: str = "1") -> Acked:
    """``records``: (key, value, timestamp ms or 0); one produce request per 50 records."""
    acked = Acked()
    with Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0, "batch.size": 4096,
                   "on_delivery": acked}) as p:
        for i, (key, value, ts) in enumerate(records):
            p.produce(topic, value=value, key=key, partition=0, timestamp=ts)
            if i % 50 == 49:
                p.flush(30)
        assert p.flush(30) == 0
    assert not acked.errors, acked.errors
    return acked


def consume_from(bootstrap: str, topic: str, offset: int, until: int, reset: str = "earliest") -> list:
    """Records from ``offset`` (auto.offset.reset applies if it is out of range) up to offset ``until - 1``."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "auto.offset.reset": reset})
    consumer.assign([TopicPartition(topic, 0, offset)])
    out = []
    deadline = time.monotonic() + 30
    try:
        while (not out or out[-1].offset() < until - 1) and time.monotonic() < deadline:
            for m in consumer.consume(1000, 0.5):
                assert m.error() is None, m.error()
                out.append(m)
    finally:
        consumer.close()
    assert out and out[-1].offset() == until - 1, "did not read up to the high watermark"
    return out


def watermarks(bootstrap: str, topic: str) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), 10)
    finally:
        consumer.close()


def active_base(data_dir: str, topic: str) -> int:
    return max(int(os.path.basename(p)[:20]) for p in glob.glob(os.path.join(data_dir, f"{topic}-0", "*.log")))


def cleaned_up_to_the_active_segment(data_dir: str, topic: str) -> bool:
    directory = os.path.join(data_dir, f"{topic}-0")
    active = active_base(data_dir, topic)
    try:
        with open(os.path.join(directory, "cleaner-offset-checkpoint")) as f:
            return int(f.read().split()[0]) >= active > 0
    except (FileNotFoundError, ValueError):
        return False


def log_start_on_disk(data_dir: str, topic: str) -> int:
    try:
        with open(os.path.join(data_dir, f"{topic}-0", "log-start-offset")) as f:
            return int(f.read())
    except FileNotFoundError:
        return 0


# ----------------------------------------------------------------------------------- compaction
def test_a_compacted_topic_read_from_the_start_holds_the_last_value_per_key(broker_factory, topic_name):
    broker = broker_factory(QUICK)
    create_topic(broker.bootstrap, topic_name, cleanup_policy="compact", segment_bytes=4000,
                 min_cleanable_dirty_ratio=0.1)
    records = [(b"key-%d" % (i % 40), None if i % 17 == 0 else b"value-%d" % i, 0) for i in range(3000)]
    acked = produce(broker.bootstrap, topic_name, records)
    wait_until(lambda: cleaned_up_to_the_active_segment(broker.data_dir, topic_name), 60, 0.1,
               "the cleaner to compact every sealed segment")

    by_offset = {offset: value for (_, offset), value in acked.values.items()}
    model = {}
    for (key, _, _), offset in zip(records, sorted(by_offset)):
        model[key] = by_offset[offset]
    _, hw = watermarks(broker.bootstrap, topic_name)
    read = consume_from(broker.bootstrap, topic_name, OFFSET_BEGINNING, hw)
    assert len(read) < len(records) / 4
    assert all(by_offset[m.offset()] == m.value() for m in read), "a record moved to another offset"
    assert {m.key(): m.value() for m in read} == model

    # A compacted topic refuses records without a key (Kafka: InvalidRecord).
    with Producer({"bootstrap.servers": broker.bootstrap, "retries": 0}) as p:
        failed = []
        p.produce(topic_name, value=b"no key", on_delivery=lambda err, msg: failed.append(err))
        p.flush(30)
    assert len(failed) == 1 and isinstance(failed[0].exception(), InvalidRecordError)


def test_compaction_keeps_committed_values_that_an_aborted_transaction_overwrote(broker_factory, topic_name):
    """v1 of 200 keys committed, v2 of the same keys aborted: after the cleaner ran past both, a
    read_committed reader still finds v1 of every key (the aborted v2 must not shadow it)."""
    broker = broker_factory(QUICK)
    create_topic(broker.bootstrap, topic_name, cleanup_policy="compact", segment_bytes=4000,
                 min_cleanable_dirty_ratio=0.1)
    keys = [b"key-%d" % i for i in range(200)]
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{topic_name}-app", "linger.ms": 1})
    try:
        p.init_transactions(30)
        for version, commit in ((b"v1", True), (b"v2", False)):
            p.begin_transaction()
            for key in keys:
                p.produce(topic_name, key=key, value=version + b"-" + key, partition=0)
            assert p.flush(30) == 0  # written before the abort: abort_transaction drops unsent records
            p.commit_transaction(30) if commit else p.abort_transaction(30)
    finally:
        p.close()
    _, marker_end = watermarks(broker.bootstrap, topic_name)
    # Plain records of other keys roll the transactions' segments out of the active one.
    produce(broker.bootstrap, topic_name, [(b"filler-%d" % i, b"x" * 50, 0) for i in range(300)])
    wait_until(lambda: cleaned_up_to_the_active_segment(broker.data_dir, topic_name)
               and active_base(broker.data_dir, topic_name) > marker_end, 60, 0.1,
               "the cleaner to compact past the aborted transaction")

    _, hw = watermarks(broker.bootstrap, topic_name)
    read = consume_from(broker.bootstrap, topic_name, OFFSET_BEGINNING, hw)  # read_committed by default
    values = {m.key(): m.value() for m in read}
    assert {k: values.get(k) for k in keys} == {k: b"v1-" + k for k in keys}
    on_disk = records_on_disk(broker.data_dir, topic_name)
    assert on_disk and not [v for _, v in on_disk.values() if v.startswith(b"v2")], "aborted records were kept"


# ----------------------------------------------------------------------------------- retention
def test_retention_removes_every_expired_segment_and_a_consumer_below_the_start_resets(broker_factory, topic_name):
    """The active segment goes too once all its records expired (as Kafka), so an idle topic keeps
    nothing past ``retention.ms``; the log goes on at the same end offset."""
    broker = broker_factory(QUICK)
    create_topic(broker.bootstrap, topic_name, retention_ms=60_000, segment_bytes=2000)
    old = int(time.time() * 1000) - 3_600_000
    produce(broker.bootstrap, topic_name, [(None, b"old-%d" % i, old) for i in range(300)])

    def segments() -> list[str]:
        return glob.glob(os.path.join(broker.data_dir, f"{topic_name}-0", "*.log"))

    wait_until(lambda: watermarks(broker.bootstrap, topic_name) == (300, 300) and len(segments()) == 1
               and os.path.getsize(segments()[0]) == 0, 30, 0.1, "retention to remove every expired segment")
    assert log_start_on_disk(broker.data_dir, topic_name) == 300 == active_base(broker.data_dir, topic_name)
    produce(broker.bootstrap, topic_name, [(None, b"new", 0)])
    read = consume_from(broker.bootstrap, topic_name, 0, 301)  # offset 0 is gone: auto.offset.reset=earliest
    assert [(m.offset(), m.value()) for m in read] == [(300, b"new")]


# ----------------------------------------------------------------------------------- DeleteRecords
def test_delete_records_with_the_admin_client_and_the_cli(broker_factory, topic_name):
    broker = broker_factory()
    create_topic(broker.bootstrap, topic_name, segment_bytes=1500)
    produce(broker.bootstrap, topic_name, [(None, b"r%d" % i, 0) for i in range(200)])
    tp = TopicPartition(topic_name, 0)
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        assert admin.delete_records({tp: 70})[tp].result(10).low_watermark == 70
        beyond = TopicPartition(topic_name, 0, 201)  # confluent-kafka's form: offsets on the partitions
        with pytest.raises(OffsetOutOfRangeError):
            admin.delete_records([beyond])[beyond].result(10)
    assert watermarks(broker.bootstrap, topic_name) == (70, 200)
    read = consume_from(broker.bootstrap, topic_name, 10, 200)
    assert (read[0].offset(), read[0].value()) == (70, b"r70")

    out = run_cli(broker.bootstrap, "delete-records", topic_name, "--offset", "120").stdout
    assert out.splitlines() == [f"{topic_name}:0:120"]
    out = run_cli(broker.bootstrap, "delete-records", topic_name, "--partition", "0", "--offset", "-1").stdout
    assert out.splitlines() == [f"{topic_name}:0:200"]
    failed = run_cli(broker.bootstrap, "delete-records", topic_name, "--offset", "500", check=False)
    assert failed.returncode == 1 and "OFFSET_OUT_OF_RANGE" in failed.stderr
    segments = glob.glob(os.path.join(broker.data_dir, f"{topic_name}-0", "*.log"))
    assert len(segments) == 1, "segments wholly below the log start were left on disk"


def test_delete_records_is_refused_unless_the_cleanup_policy_has_delete(broker_factory, topic_name):
    broker = broker_factory()
    for policy, allowed in (("compact", False), ("compact,delete", True), ("", False)):
        name = f"{topic_name}-{policy.replace(',', '-') or 'none'}"
        create_topic(broker.bootstrap, name, cleanup_policy=policy)
        produce(broker.bootstrap, name, [(b"k%d" % i, b"v", 0) for i in range(5)])
        tp = TopicPartition(name, 0)
        with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
            if allowed:
                assert admin.delete_records({tp: 2})[tp].result(10).low_watermark == 2
            else:
                with pytest.raises(PolicyViolationError, match="cleanup.policy"):
                    admin.delete_records({tp: 2})[tp].result(10)
        assert watermarks(broker.bootstrap, name) == (2 if allowed else 0, 5), policy


def test_a_timestamp_lookup_after_delete_records_inside_a_batch_finds_the_next_record(broker_factory, topic_name):
    broker = broker_factory()
    create_topic(broker.bootstrap, topic_name)
    base = int(time.time() * 1000) - 60_000
    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 100}) as p:  # one batch
        for i in range(6):
            p.produce(topic_name, value=b"r%d" % i, partition=0, timestamp=base + i * 1000)
        assert p.flush(30) == 0
    tp = TopicPartition(topic_name, 0)
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        assert admin.delete_records({tp: 3})[tp].result(10).low_watermark == 3
    consumer = Consumer({"bootstrap.servers": broker.bootstrap})
    try:
        for ts, expected in ((base, 3), (base + 3000, 3), (base + 4000, 4), (base + 6000, -1)):
            found = consumer.offsets_for_times([TopicPartition(topic_name, 0, ts)], 10)[0]
            assert found.offset == expected, ts
    finally:
        consumer.close()


def test_delete_records_on_a_replicated_topic_moves_every_replicas_log_start(cluster_factory, topic_name):
    cluster = cluster_factory(3, {**FAST, **QUICK})
    create(cluster, topic_name, rf=3, segment_bytes=1500)
    produce(cluster.bootstrap, topic_name, [(None, b"r%d" % i, 0) for i in range(300)], acks="all")
    tp = TopicPartition(topic_name, 0)
    with cluster.admin() as admin:
        assert admin.delete_records({tp: 150})[tp].result(30).low_watermark == 150
    dirs = [node.data_dir for node in cluster.nodes.values()]

    def bases(d):
        return sorted(int(os.path.basename(p)[:20]) for p in glob.glob(os.path.join(d, f"{topic_name}-0", "*.log")))

    # the log start moves first; the segments wholly below it go at the next retention pass
    wait_until(lambda: all(log_start_on_disk(d, topic_name) == 150 for d in dirs), 30, 0.1,
               "every replica's log start offset to reach 150")
    wait_until(lambda: all(b[0] <= 150 and (len(b) == 1 or b[1] > 150) for b in map(bases, dirs)), 30, 0.1,
               "every replica (followers too) to drop the segments wholly below 150")
    read = consume_from(cluster.bootstrap, topic_name, OFFSET_BEGINNING, 300)
    assert [m.offset() for m in read] == list(range(150, 300))


def records_on_disk(data_dir: str, topic: str) -> dict | None:
    """{offset: (key, value)} read straight from a replica's segment files (None while a file moves)."""
    rows = {}
    try:
        for path in sorted(glob.glob(os.path.join(data_dir, f"{topic}-0", "*.log"))):
            with open(path, "rb") as f:
                for batch in decode_records(f.read(), 0):
                    cols = batch.records.to_pydict()
                    for i, (k, v) in enumerate(zip(cols["key"], cols["value"])):
                        rows[batch.base_offset + i] = (k, v)
    except (OSError, RiverlogError):
        return None
    return rows


def test_a_follower_that_was_down_catches_up_from_a_compacted_leader(cluster_factory, topic_name):
    cluster = cluster_factory(3, {**FAST, **QUICK})
    create(cluster, topic_name, rf=3, cleanup_policy="compact", segment_bytes=3000, min_cleanable_dirty_ratio=0.1)
    records = [(b"key-%d" % (i % 30), b"value-%d" % i, 0) for i in range(2500)]
    produce(cluster.bootstrap, topic_name, records[:200], acks="all")
    leader_id = cluster.partition(topic_name, 0).leader
    follower_id = next(i for i in cluster.nodes if i != leader_id)
    follower = cluster.nodes[follower_id]
    follower.stop()
    acked = produce(cluster.bootstrap, topic_name, records[200:], acks="1")
    wait_until(lambda: cleaned_up_to_the_active_segment(cluster.nodes[leader_id].data_dir, topic_name), 60, 0.1,
               "the leader to compact what the follower missed")

    follower.start()
    wait_until(lambda: follower_id in cluster.partition(topic_name, 0).isr, 60, 0.2, "the follower back in the ISR")
    by_offset = {offset: value for (_, offset), value in acked.values.items()}
    model = {}
    for (key, value, _), offset in zip(records, range(2500)):
        model[key] = (offset, value)

    def follower_holds_the_model():
        rows = records_on_disk(follower.data_dir, topic_name)
        if rows is None or max(rows, default=-1) != 2499:
            return False
        assert all(value == by_offset.get(offset, value) for offset, (_, value) in rows.items())
        latest = {}
        for offset in sorted(rows):
            latest[rows[offset][0]] = (offset, rows[offset][1])
        return latest == model

    wait_until(follower_holds_the_model, 30, 0.2, "the follower to hold the last value of every key")
