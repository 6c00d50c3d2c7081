"""Kafka habits that work unchanged: --bootstrap-server after the command, auto-created topics,
topic-level compression.type, and refused topic configs that say why."""
from __future__ import annotations

import os
import subprocess
import sys
import uuid

import grpc
import pytest

from broker.client import AdminClient, Consumer, KafkaError, NewTopic, Producer
from broker.errors import InvalidConfigError, UnknownTopicOrPartitionError
from broker.proto import riverlog_pb2 as pb
from broker.proto import riverlog_pb2_grpc as pb_grpc
from broker.records.batch import COMPRESSION_LZ4, COMPRESSION_NONE, COMPRESSION_ZSTD, iter_headers
from tests.conftest import ROOT


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "broker", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, **(env or {})}, timeout=120)


def _read_all(consumer_config: dict, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({**consumer_config, "group.id": f"g-{uuid.uuid4().hex}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    values = []
    try:
        while len(values) < count:
            m = consumer.poll(30)
            assert m is not None, f"only {len(values)} of {count} records arrived"
            assert m.error() is None, m.error()
            values.append(m.value())
    finally:
        consumer.close()
    return values


def test_bootstrap_server_after_the_command_and_from_the_environment(broker_factory):
    b = broker_factory()
    r = _cli("topics", "create", "after", "--bootstrap-server", b.bootstrap)
    assert r.returncode == 0, r.stderr
    r = _cli("topics", "list", env={"RIVERLOG_BOOTSTRAP_SERVERS": b.bootstrap})
    assert r.returncode == 0, r.stderr
    assert "after" in r.stdout.split()


def test_help_names_kafka_tools():
    out = _cli("--help").stdout
    for tool in ("kafka-topics", "kafka-console-producer", "kafka-console-consumer", "kafka-consumer-groups"):
        assert tool in out
    assert "kafka-topics --create" in _cli("topics", "--help").stdout
    assert "--bootstrap-server" in _cli("topics", "create", "--help").stdout


def test_produce_creates_an_unknown_topic(broker_factory):
    b = broker_factory({"num.partitions": 2})
    with Producer({"bootstrap.servers": b.bootstrap}) as producer:
        producer.produce("fresh", b"v")
        assert producer.flush(30) == 0
    with AdminClient({"bootstrap.servers": b.bootstrap}) as admin:
        assert len(admin.list_topics("fresh").topics["fresh"].partitions) == 2


def test_subscribe_creates_an_unknown_topic(broker_factory):
    b = broker_factory()
    consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "g"})
    consumer.subscribe(["subscribed"])
    try:
        consumer.poll(1)
        with AdminClient({"bootstrap.servers": b.bootstrap}) as admin:
            info = admin.list_topics("subscribed").topics["subscribed"]
            assert info.error is None and len(info.partitions) == 1
    finally:
        consumer.close()


def test_no_auto_creation_when_disabled(broker_factory):
    b = broker_factory({"auto.create.topics.enable": "false"})
    errors = []
    with Producer({"bootstrap.servers": b.bootstrap, "topic.metadata.propagation.max.ms": 500}) as producer:
        producer.produce("absent", b"v", on_delivery=lambda err, msg: errors.append(err))
        producer.flush(30)
    assert len(errors) == 1 and errors[0] is not None and "absent" in str(errors[0])
    assert errors[0].code() == KafkaError.UNKNOWN_TOPIC_OR_PART, errors[0]
    with AdminClient({"bootstrap.servers": b.bootstrap}) as admin:
        listed = admin.list_topics("absent").topics["absent"]
        assert isinstance(listed.error, UnknownTopicOrPartitionError), listed.error
        assert listed.partitions == {} and "absent" not in admin.list_topics().topics


def test_no_broker_answering_times_records_out_at_delivery_timeout_and_tells_error_cb():
    # librdkafka: a record waiting for metadata no broker gives fails at message.timeout.ms with
    # _MSG_TIMED_OUT (not after the propagation time, not as a network error), and error_cb hears
    # _ALL_BROKERS_DOWN once.
    from tests.conftest import free_ports
    errors, reports = [], []
    port = free_ports(1)[0]
    with Producer({"bootstrap.servers": f"127.0.0.1:{port}", "delivery.timeout.ms": 1500,
                   "topic.metadata.propagation.max.ms": 60_000, "error_cb": errors.append}) as producer:
        producer.produce("t", b"v", on_delivery=lambda err, msg: reports.append(err))
        assert producer.flush(20) == 0
    assert [e.code() for e in reports] == [KafkaError._MSG_TIMED_OUT], reports
    assert [e.code() for e in errors] == [KafkaError._ALL_BROKERS_DOWN], errors


def test_admin_listing_does_not_create(broker_factory):
    b = broker_factory()
    with AdminClient({"bootstrap.servers": b.bootstrap}) as admin:
        typo = admin.list_topics("typo").topics["typo"]
        assert isinstance(typo.error, UnknownTopicOrPartitionError), typo.error
        assert typo.partitions == {} and "typo" not in admin.list_topics().topics


@pytest.mark.parametrize("topic_codec,producer_codec,stored", [
    ("zstd", "lz4", COMPRESSION_ZSTD), ("lz4", "none", COMPRESSION_LZ4),
    ("uncompressed", "zstd", COMPRESSION_NONE), ("producer", "lz4", COMPRESSION_LZ4)])
def test_topic_compression_type(broker_factory, topic_codec, producer_codec, stored):
    b = broker_factory()
    with AdminClient({"bootstrap.servers": b.bootstrap}) as admin:
        admin.create_topics([NewTopic("c", 1, 1, config={"compression.type": topic_codec})])["c"].result(30)
    sent = [f"value-{i}".encode() * 20 for i in range(50)]
    with Producer({"bootstrap.servers": b.bootstrap, "compression.type": producer_codec, "linger.ms": 20}) as p:
        for v in sent:
            p.produce("c", v, key=b"k")
        assert p.flush(30) == 0
    with grpc.insecure_channel(b.bootstrap) as channel:
        reply = pb_grpc.RiverlogStub(channel).Fetch(pb.FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 24,
            topics=[pb.FetchTopic(name="c", partitions=[pb.FetchPartition(partition=0, fetch_offset=0)])]),
            timeout=30)
    records = reply.topics[0].partitions[0].records
    codecs = {h.compression for _, h in iter_headers(records)}
    assert codecs == {stored}
    assert _read_all({"bootstrap.servers": b.bootstrap}, "c", len(sent)) == sent


def test_refused_topic_config_names_the_reason(broker_factory):
    b = broker_factory()
    with AdminClient({"bootstrap.servers": b.bootstrap}) as admin:
        for key, value, reason in [("compression.type", "gzip", "zstd"), ("remote.storage.enable", "true", "tiered"),
                                   ("preallocate", "true", "preallocate")]:
            future = admin.create_topics([NewTopic(f"r{len(key)}", 1, 1, config={key: value})])[f"r{len(key)}"]
            with pytest.raises(InvalidConfigError) as e:
                future.result(30)
            assert key in str(e.value) and reason in str(e.value)


def test_broker_start_wait_returns_once_ready(tmp_path):
    r = _cli("broker", "start", "--data-dir", str(tmp_path / "n"), "--port", "0", "--wait")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "ready: serving clients on" in r.stdout
    address = r.stdout.split("serving clients on ")[1].split()[0]
    pid = int(r.stdout.split("(pid ")[1].split(";")[0])
    try:
        created = _cli("topics", "create", "right-away", "--replication-factor", "1", "--bootstrap-server", address)
        assert created.returncode == 0, created.stderr
    finally:
        os.kill(pid, 9)


def test_timestamp_bounds_refuse_batches_too_old(broker_factory):
    b = broker_factory()
    with AdminClient({"bootstrap.servers": b.bootstrap}) as admin:
        admin.create_topics([NewTopic("ts", 1, 1, config={"message.timestamp.before.max.ms": "60000"})])["ts"].result(30)
    reports = []
    with Producer({"bootstrap.servers": b.bootstrap, "retries": 0}) as producer:
        producer.produce("ts", b"old", timestamp=1000, on_delivery=lambda e, m: reports.append(e))
        producer.flush(30)
    assert reports and reports[0] is not None and "message.timestamp.before.max.ms" in reports[0].str()
