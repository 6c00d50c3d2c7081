"""The producer as confluent-kafka-python over librdkafka behaves, through a real broker: where the
fnv1a partitioners put keys, which partitions are refused, the positional argument order, what
counts against message.max.bytes, the no-timestamp value and a closed producer."""
from __future__ import annotations

import ctypes
import random
import time

import pyarrow as pa
import pytest

from broker.client import (OFFSET_BEGINNING, AdminClient, Consumer, KafkaError, KafkaException, NewTopic, Producer,
                           TopicPartition)
from broker.errors import ClientClosedError
from tests.conftest import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def _create(servers: str, name: str, partitions: int = 1, config: dict | None = None) -> None:
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1, config or {})])[name].result(30)


def _read(servers: str, topic: str, partitions: int, expected: int) -> list:
    consumer = Consumer({"bootstrap.servers": servers})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out: list = []
    try:
        deadline = time.monotonic() + 60
        while len(out) < expected and time.monotonic() < deadline:
            out.extend(m for m in consumer.consume(10_000, 0.5) if m.error() is None)
    finally:
        consumer.close()
    assert len(out) == expected, f"read {len(out)} of {expected} records"
    return out


def rd_fnv1a(key: bytes) -> int:
    """librdkafka's src/rdfnv1a.c: FNV-1a in an int32, its absolute value at the end."""
    h = ctypes.c_int32(0x811C9DC5)
    for byte in key:
        h = ctypes.c_int32((h.value ^ byte) * 0x01000193)
    return ctypes.c_uint32(abs(h.value)).value


# ------------------------------------------------------------------------------ fnv1a partitioners
@pytest.mark.parametrize("partitioner", ["fnv1a", "fnv1a_random"])
def test_fnv1a_places_keys_as_librdkafka_through_produce_and_produce_batch(shared_broker, topic_name, partitioner):
    servers, n = shared_broker.bootstrap, 17
    _create(servers, topic_name, n)
    rng = random.Random(7)
    keys = [b"", b"23456", b"hejsan", b"this is another string with more length to it perhaps"] + \
        [rng.randbytes(rng.randrange(1, 30)) for _ in range(150)] + [b"user-%d" % i for i in range(150)]
    delivered = {}
    with Producer({"bootstrap.servers": servers, "partitioner": partitioner, "linger.ms": 5}) as p:
        for i, key in enumerate(keys):
            p.produce(topic_name, b"one", key,
                      on_delivery=lambda e, m, i=i: delivered.__setitem__(i, (e, m.partition())))
        p.produce_batch(topic_name, pa.table({"key": pa.array(keys, pa.binary()),
                                              "value": pa.array([b"batch"] * len(keys), pa.binary())}))
        assert p.flush(30) == 0
    assert {i: e for i, (e, _) in delivered.items() if e is not None} == {}
    expected = [rd_fnv1a(k) % n for k in keys]
    assert [delivered[i][1] for i in range(len(keys))] == expected
    assert expected[2] == 0x17B1E27A % n   # librdkafka's tests/0048-partitioner.c for "hejsan"
    placed = {(m.key(), m.value()): m.partition() for m in _read(servers, topic_name, n, 2 * len(keys))}
    assert {k: placed[(k, b"batch")] for k in keys} == {k: rd_fnv1a(k) % n for k in keys}


# ------------------------------------------------------------------------------ partitions
def test_a_negative_partition_other_than_minus_one_is_unknown_not_repartitioned(shared_broker, topic_name):
    servers = shared_broker.bootstrap
    _create(servers, topic_name, 3)
    reports = []
    with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
        # Metadata not known yet: queued, then failed on delivery (librdkafka's UA queue, re-partitioned).
        p.produce(topic_name, b"x", b"k", -5, on_delivery=lambda e, m: reports.append((e and e.code(), m.partition())))
        p.produce(topic_name, b"ok", b"k", on_delivery=lambda e, m: reports.append((e and e.code(), m.partition())))
        assert p.flush(30) == 0
        assert reports[0] == (KafkaError._UNKNOWN_PARTITION, -5) and reports[1][0] is None, reports
        # Metadata known: refused by produce() itself, as rd_kafka_msg_partitioner refuses it.
        for partition in (-2, -5, -2**31):
            with pytest.raises(KafkaException) as raised:
                p.produce(topic_name, b"x", partition=partition)
            assert raised.value.args[0].code() == KafkaError._UNKNOWN_PARTITION
        with pytest.raises(KafkaException):
            p.produce_batch(topic_name, pa.table({"value": pa.array([b"a", b"b"], pa.binary())}), -2)
        messages = [{"value": b"a", "partition": -3}, {"value": b"b"}]
        assert p.produce_batch(topic_name, messages) == 1
        assert messages[0]["_error"].code() == KafkaError._UNKNOWN_PARTITION and "_error" not in messages[1]
        with pytest.raises(OverflowError):
            p.produce(topic_name, b"x", partition=2**31)
        assert p.flush(30) == 0
    values = sorted(m.value() for m in _read(servers, topic_name, 3, 2))
    assert values == [b"b", b"ok"]


# ------------------------------------------------------------------------------ argument order
def test_positional_arguments_follow_confluents_order(shared_broker, topic_name):
    servers = shared_broker.bootstrap
    _create(servers, topic_name)
    seen = []

    def report(name):
        return lambda err, msg: seen.append((name, err, msg.timestamp()[1]))

    with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
        # Producer.c: topic, value, key, partition, callback, on_delivery, timestamp, headers.
        p.produce(topic_name, b"v0", b"k", 0, report("callback"), None, 1234, [("h", b"1")])
        p.produce(topic_name, b"v1", b"k", 0, None, report("on_delivery"), 1235)
        p.produce(topic_name, b"v2", b"k", 0, report("callback wins"), report("alias"), 1236)
        assert p.flush(30) == 0
        # produce_batch: topic, messages, partition, callback, on_delivery.
        messages = [{"value": b"b0", "timestamp": 1237}, {"value": b"b1", "timestamp": 1238}]
        assert p.produce_batch(topic_name, messages, -1, report("batch callback"), report("batch alias")) == 2
        assert [m.get("_error") for m in messages] == [None, None]
        messages = [{"value": b"b2", "timestamp": 1239}]
        assert p.produce_batch(topic_name, messages, 0, None, report("batch on_delivery")) == 1
        assert p.flush(30) == 0
    assert seen == [("callback", None, 1234), ("on_delivery", None, 1235), ("callback wins", None, 1236),
                    ("batch callback", None, 1237), ("batch callback", None, 1238),
                    ("batch on_delivery", None, 1239)]
    first = _read(servers, topic_name, 1, 6)[0]
    assert (first.value(), first.timestamp()[1], first.headers()) == (b"v0", 1234, [("h", b"1")])


# ------------------------------------------------------------------------------ sizes
def test_headers_count_against_message_max_bytes(shared_broker, topic_name):
    servers = shared_broker.bootstrap
    _create(servers, topic_name)
    with Producer({"bootstrap.servers": servers, "linger.ms": 0, "message.max.bytes": 10_000}) as p:
        with pytest.raises(KafkaException) as raised:
            p.produce(topic_name, b"x" * 5000, headers=[("h", b"y" * 8000)])
        assert raised.value.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
        messages = [{"value": b"x" * 5000, "headers": {"h": b"y" * 8000}},
                    {"value": b"x" * 5000, "headers": {"h": b"y"}}]
        assert p.produce_batch(topic_name, messages) == 1
        assert messages[0]["_error"].code() == KafkaError.MSG_SIZE_TOO_LARGE
        assert p.flush(30) == 0
    assert [len(m.value()) for m in _read(servers, topic_name, 1, 1)] == [5000]


def test_produce_batch_refuses_a_record_produce_would_refuse_and_queues_nothing(shared_broker, topic_name):
    """librdkafka's ``rd_kafka_msg_new0`` refuses a message over message.max.bytes on every produce
    path: an Arrow table with one (headers counted) raises MSG_SIZE_TOO_LARGE naming its row."""
    servers = shared_broker.bootstrap
    _create(servers, topic_name)
    headers = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    with Producer({"bootstrap.servers": servers, "linger.ms": 0, "message.max.bytes": 10_000}) as p:
        for table in (pa.table({"value": [b"a", b"x" * 10_001]}),
                      pa.table({"value": [b"a", b"x" * 5000],
                                "headers": pa.array([None, [("h", b"y" * 5000)]], headers)})):
            with pytest.raises(KafkaException, match=r"record 1 of the batch .* message.max.bytes=10000") as raised:
                p.produce_batch(topic_name, table)
            assert raised.value.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
            assert len(p) == 0
        assert p.produce_batch(topic_name, pa.table({"value": [b"b", b"x" * 10_000]})) == 2
        assert p.flush(30) == 0
    assert [len(m.value()) for m in _read(servers, topic_name, 1, 2)] == [1, 10_000]


def test_max_request_size_caps_one_record_as_kafkas_producer(shared_broker, topic_name):
    """Kafka's ``KafkaProducer.ensureValidRecordSize``: no record larger than max.request.size is
    taken, by ``produce()`` or ``produce_batch()``."""
    servers = shared_broker.bootstrap
    _create(servers, topic_name)
    with Producer({"bootstrap.servers": servers, "linger.ms": 0, "max.request.size": 2000}) as p:
        with pytest.raises(KafkaException, match="exceeds max.request.size=2000") as raised:
            p.produce(topic_name, b"x" * 2001)
        assert raised.value.args[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
        with pytest.raises(KafkaException, match="record 0 of the batch .* max.request.size=2000"):
            p.produce_batch(topic_name, pa.table({"value": [b"x" * 2001]}))
        p.produce(topic_name, b"x" * 2000)
        assert p.flush(30) == 0
    assert [len(m.value()) for m in _read(servers, topic_name, 1, 1)] == [2000]


def test_produce_batch_partition_column_keeps_a_partitions_order(shared_broker, topic_name):
    """Each row's ``partition`` (null: the partitioner's), as the dicts' ``partition``: rows bound for
    one partition are written in table order whichever placed them."""
    servers = shared_broker.bootstrap
    _create(servers, topic_name, 2)
    values = [f"v{i}".encode() for i in range(8)]
    parts = pa.array([None, 0, None, 1, 0, None, -1, 0], pa.int32())
    with Producer({"bootstrap.servers": servers, "linger.ms": 0, "partitioner": "murmur2"}) as p:
        assert p.produce_batch(topic_name, pa.table({"key": [b"k"] * 8, "value": values, "partition": parts})) == 8
        assert p.flush(30) == 0
    got = _read(servers, topic_name, 2, 8)
    by_partition = {q: [m.value() for m in sorted(got, key=lambda m: m.offset()) if m.partition() == q]
                    for q in (0, 1)}
    keyed = next(m.partition() for m in got if m.value() == b"v0")
    expected = {q: [v for v, named in zip(values, parts.to_pylist()) if (keyed if named in (None, -1) else named) == q]
                for q in (0, 1)}
    assert by_partition == expected


# ------------------------------------------------------------------------------ timestamps
def test_no_timestamp_is_not_checked_against_the_timestamp_bounds(shared_broker, topic_name):
    """Kafka's LogValidator.validateTimestamp skips RecordBatch.NO_TIMESTAMP (-1); other negative
    timestamps are still out of range."""
    servers = shared_broker.bootstrap
    _create(servers, topic_name, 1, {"message.timestamp.before.max.ms": "3600000"})
    reports = []
    with Producer({"bootstrap.servers": servers, "linger.ms": 0, "retries": 0}) as p:
        for ts in (-1, -5):
            p.produce(topic_name, b"ts%d" % ts, partition=0, timestamp=ts,
                      on_delivery=lambda e, m: reports.append((m.value(), e and e.code())))
            assert p.flush(30) == 0
    assert reports == [(b"ts-1", None), (b"ts-5", KafkaError.INVALID_TIMESTAMP)]
    assert [m.value() for m in _read(servers, topic_name, 1, 1)] == [b"ts-1"]


# ------------------------------------------------------------------------------ closing
def test_a_closed_producer_refuses_poll_and_flush_as_produce(shared_broker):
    p = Producer({"bootstrap.servers": shared_broker.bootstrap})
    assert p.close() == 0
    for call in (lambda: p.produce("t", b"x"), lambda: p.flush(1), lambda: p.poll(0)):
        with pytest.raises(RuntimeError, match="^Producer has been closed$") as raised:
            call()
        assert isinstance(raised.value, ClientClosedError)
    assert p.close() == 0   # closing again does nothing, as confluent-kafka's close
    wait_until(lambda: not p._thread.is_alive(), 10, message="the sender thread to stop")


def test_a_negative_timestamp_comes_back_as_stored(shared_broker, topic_name):
    """librdkafka's ``rd_kafka_message_timestamp`` returns the record's timestamp and type, a
    negative one too; only -1 (no timestamp) reads as not available."""
    servers = shared_broker.bootstrap
    _create(servers, topic_name)
    reports = []
    with Producer({"bootstrap.servers": servers}) as producer:
        for ts in (1000, -5):
            producer.produce(topic_name, str(ts).encode(), partition=0, timestamp=ts,
                             on_delivery=lambda err, msg: reports.append(msg.timestamp()))
        producer.flush(30)
    assert reports == [(1, 1000), (1, -5)]
    assert [m.timestamp() for m in _read(servers, topic_name, 1, 2)] == [(1, 1000), (1, -5)]
