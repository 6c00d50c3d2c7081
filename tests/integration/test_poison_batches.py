"""Poison batches: the broker refuses bodies that disagree with their header, and a consumer that
meets a batch it cannot decode delivers what came before, reports it at its offset and stays there.

The fuzz test is seeded: a failure prints its seed; ``POISON_SEED=<seed>`` replays it.
"""
from __future__ import annotations

import glob
import os
import random
import struct
import time

import pyarrow as pa
import pytest

from broker.client import Consumer, TopicPartition
from broker.client.cluster import ClusterClient
from broker.client.message import OFFSET_BEGINNING
from broker.errors import CorruptRecordError, InvalidRecordError, error_for_code
from broker.proto import riverlog_pb2 as pb
from broker.records import arrow_body, ipc_layout
from broker.records.batch import (CRC_START, HEADER_SIZE, TRANSACTIONAL, build_batch, compute_crc, iter_headers,
                                  validate_batches)
from tests.conftest import wait_until
from tests.integration.test_produce_consume import create

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


# ------------------------------------------------------------------------------ building batches
def good_batch(rng: random.Random, tag: str, compression: str = "none") -> tuple[bytes, list[bytes]]:
    n = rng.randint(1, 20)
    values = [f"{tag}-{i}".encode() for i in range(n)]
    keys = [None if rng.random() < 0.3 else f"k{i}".encode() for i in range(n)]
    headers = [None if rng.random() < 0.5 else [("h", b"x" * rng.randint(0, 5))] for _ in range(n)]
    batch = arrow_body.record_batch(keys, values, [1_700_000_000_000 + i for i in range(n)], headers)
    return arrow_body.encode_batch(batch, compression), values


def reframe(body: bytes, record_count: int, attributes: int = 0, **fields) -> bytes:
    """``body`` under a fresh header (correct length and CRC) declaring ``record_count`` records."""
    return build_batch(body, record_count=record_count, base_timestamp=1, max_timestamp=1,
                       attributes=attributes, **fields)


def with_crc(data: bytearray) -> bytes:
    struct.pack_into(">I", data, 17, compute_crc(data, 0, len(data)))
    return bytes(data)


def poison(rng: random.Random) -> tuple[str, bytes, bool]:
    """(kind, batch, must_refuse): a batch with a correct CRC that lies somewhere."""
    data, values = good_batch(rng, "poison", rng.choice(["none", "lz4", "zstd"]))
    attributes = struct.unpack_from(">h", data, CRC_START)[0]
    body = data[HEADER_SIZE:]
    n = len(values)
    kind = rng.choice(["count", "count-max", "count-low", "schema", "truncated", "extended", "length-field",
                       "txn-no-pid", "delta", "metadata-bytes", "body-bytes"])
    if kind == "count":
        return kind, reframe(body, n + rng.randint(1, 1000), attributes), True
    if kind == "count-max":
        return kind, reframe(body, 2**31 - 1, attributes), True
    if kind == "count-low" and n > 1:
        return kind, reframe(body, rng.randint(1, n - 1), attributes), True
    if kind == "schema":
        other = rng.choice([
            pa.record_batch([pa.array(values), pa.array([1] * n)], names=["value", "timestamp"]),
            pa.record_batch([pa.array(values), pa.array(values), pa.array([1] * n), pa.array(values)],
                            names=["key", "value", "timestamp", "headers"]),
            pa.record_batch([pa.array(values), pa.array(values), pa.array([1] * n),
                             pa.nulls(n, arrow_body.HEADER_TYPE), pa.array([2] * n)],
                            names=["key", "value", "timestamp", "headers", "more"]),
        ])
        return kind, reframe(other.serialize().to_pybytes(), n), True
    if kind == "truncated":
        return kind, reframe(body[:rng.randint(0, len(body) - 1)], n, attributes), True
    if kind == "extended":
        return kind, reframe(body + bytes(rng.randint(1, 64)), n, attributes), True
    if kind == "length-field":
        out = bytearray(data)
        struct.pack_into(">i", out, 8, struct.unpack_from(">i", out, 8)[0] + rng.choice([-9, -1, 1, 7, 10**6]))
        return kind, bytes(out), True
    if kind == "txn-no-pid":
        return kind, reframe(body, n, attributes | TRANSACTIONAL), True
    if kind == "delta":
        out = bytearray(data)
        struct.pack_into(">i", out, 23, rng.choice([n, n - 2 if n > 1 else 5, 2**31 - 2]))
        return kind, with_crc(out), True
    # Random bytes with the CRC recomputed: in the flatbuffer metadata (the broker's checks see
    # these), or anywhere in the body (values the broker does not read: stored only if the
    # metadata still agrees, then the consumer must decode it or report it).
    out = bytearray(data)
    meta_end = HEADER_SIZE + 8 + struct.unpack_from("<i", body, 4)[0]
    low = HEADER_SIZE if kind == "metadata-bytes" else HEADER_SIZE + 8
    high = meta_end if kind == "metadata-bytes" else len(out)
    for _ in range(rng.randint(1, 4)):
        out[rng.randrange(low, high)] = rng.randrange(256)
    return kind, with_crc(out), False


# ------------------------------------------------------------------------------ raw client
class Raw:
    def __init__(self, servers: str):
        self.cluster = ClusterClient(servers)

    def produce(self, topic: str, records: bytes):
        request = pb.ProduceRequest(acks=-1, topics=[pb.ProduceTopic(
            name=topic, partitions=[pb.ProducePartition(partition=0, records=records)])])
        r = self.cluster.call("Produce", request).topics[0].partitions[0]
        return (error_for_code(r.error_code)(r.error_message) if r.error_code else None), r.base_offset

    def stored(self, topic: str) -> bytes:
        """Every stored batch of partition 0, as the broker serves them."""
        out, offset = [], 0
        while True:
            request = pb.FetchRequest(replica_id=-1, max_wait_ms=0, topics=[pb.FetchTopic(
                name=topic, partitions=[pb.FetchPartition(partition=0, fetch_offset=offset, max_bytes=1 << 20)])])
            r = self.cluster.call("Fetch", request).topics[0].partitions[0]
            assert not r.error_code, r.error_message
            headers = list(iter_headers(r.records))
            if not headers:
                return b"".join(out)
            out.append(bytes(r.records[:headers[-1][0] + headers[-1][1].size]))
            offset = headers[-1][1].next_offset

    def close(self):
        self.cluster.close()


def consume_all(servers: str, topic: str, end: int, timeout: float = 60) -> tuple[dict, list]:
    """Every record up to ``end`` by offset, and the error events; past each bad batch by seek()."""
    consumer = Consumer({"bootstrap.servers": servers, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    records, errors = {}, []
    try:
        deadline = time.monotonic() + timeout
        position = 0
        while position < end:
            assert time.monotonic() < deadline, f"stuck at {position} of {end}; errors {errors}"
            for m in consumer.consume(1000, 0.5):
                if m.error() is not None:
                    assert isinstance(m.error().exception(), CorruptRecordError), m.error()
                    assert (m.topic(), m.partition(), m.offset()) == (topic, 0, position), (m.offset(), position)
                    assert consumer.position([TopicPartition(topic, 0)])[0].offset == position
                    errors.append((m.offset(), m.error().exception().details["next_offset"]))
                    position = m.error().exception().details["next_offset"]
                    consumer.seek(TopicPartition(topic, 0, position))
                    break
                assert m.offset() == position, (m.offset(), position)
                records[m.offset()] = m.value()
                position = m.offset() + 1
    finally:
        consumer.close()
    return records, errors


# ------------------------------------------------------------------------------ the fuzz test
def test_fuzzed_poison_batches_are_refused_and_good_ones_all_delivered(shared_broker, topic_name):
    seed = int(os.environ.get("POISON_SEED", random.randrange(2**32)))
    print(f"POISON_SEED={seed}")
    rng = random.Random(seed)
    servers = shared_broker.bootstrap
    create(servers, topic_name)
    raw = Raw(servers)
    expected: dict[int, bytes] = {}      # offset -> value of every good record
    accepted_poison: list[tuple[int, str]] = []
    try:
        for i in range(300):
            if rng.random() < 0.4:
                data, values = good_batch(rng, f"good{i}", rng.choice(["none", "lz4", "zstd"]))
                error, base = raw.produce(topic_name, data)
                assert error is None, f"seed {seed}: a good batch was refused: {error!r}"
                expected.update((base + j, v) for j, v in enumerate(values))
                continue
            kind, data, must_refuse = poison(rng)
            error, base = raw.produce(topic_name, data)
            if must_refuse:
                assert isinstance(error, (CorruptRecordError, InvalidRecordError)), \
                    f"seed {seed}: {kind} batch was {'stored' if error is None else 'refused with ' + repr(error)}"
                assert error.message
            elif error is None:
                accepted_poison.append((base, kind))
            else:
                assert isinstance(error, (CorruptRecordError, InvalidRecordError)), f"seed {seed}: {error!r}"

        from broker.records.reader import decode_available

        # Read the log back: contiguous offsets, every batch passes the produce checks again,
        # and every batch decodes to exactly its declared records unless it is damaged poison.
        stored = raw.stored(topic_name)
        headers = [h for _, h in iter_headers(stored)]
        assert headers[0].base_offset == 0
        for before, after in zip(headers, headers[1:]):
            assert after.base_offset == before.next_offset, f"seed {seed}: offsets jump {before} -> {after}"
        validate_batches(stored, max_batch_bytes=1 << 30)
        poison_offsets = {base for base, _ in accepted_poison}
        undecodable = set()
        for pos, h in iter_headers(stored):
            decoded, failure = decode_available(stored[pos:pos + h.size], h.base_offset)
            if failure is not None:
                assert h.base_offset in poison_offsets, f"seed {seed}: a good batch at {h.base_offset} fails"
                undecodable.add((h.base_offset, h.next_offset))
            else:
                assert sum(d.records.num_rows for d in decoded) == h.record_count
        end = headers[-1].next_offset
    finally:
        raw.close()

    records, errors = consume_all(servers, topic_name, end)
    print(f"{len(expected)} good records; {len(accepted_poison)} damaged batches stored, "
          f"{len(undecodable)} of them undecodable")
    assert set(errors) == undecodable, f"seed {seed}"
    for offset, value in expected.items():
        assert records.get(offset) == value, f"seed {seed}: good record at {offset} not delivered"


# ------------------------------------------------------------------------------ the consumer
def bad_values_batch() -> bytes:
    """A batch the broker's header-only checks accept but no client can decode: the values'
    offsets point past their data (the broker never reads values)."""
    body = bytearray(arrow_body.encode_body(arrow_body.record_batch([None] * 3, [b"x", b"y", b"z"], [1] * 3))
                     .to_pybytes())
    layout = ipc_layout.read_layout(body)
    offset, _ = layout.buffers[4]  # the value column's offsets
    struct.pack_into("<i", body, layout.body_start + offset + 8, 1 << 20)
    return reframe(bytes(body), 3)


def produce_values(raw: Raw, topic: str, values: list[bytes]) -> int:
    data = arrow_body.encode_batch(arrow_body.record_batch([None] * len(values), values, [1] * len(values)))
    error, base = raw.produce(topic, data)
    assert error is None, error
    return base


def check_halts_at_bad_batch(servers: str, topic: str, bad: int, count: int, total: int, api: str) -> None:
    consumer = Consumer({"bootstrap.servers": servers, "auto.offset.reset": "earliest"})
    tp = TopicPartition(topic, 0)
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    try:
        before = []
        event = None

        def take():
            nonlocal event
            msgs = [consumer.poll(0.2)] if api == "poll" else consumer.consume(100, 0.2)
            for m in msgs:
                if m is None:
                    continue
                if m.error() is not None:
                    event = m
                    return True
                before.append(m)
            return False

        wait_until(take, 30, 0, "the error event")
        assert [m.offset() for m in before] == list(range(bad)), "records before the bad batch"
        assert [m.value() for m in before] == [f"a{i}".encode() for i in range(bad)]
        assert (event.topic(), event.partition(), event.offset()) == (topic, 0, bad)
        assert isinstance(event.error().exception(), CorruptRecordError)
        assert event.error().exception().details == {"offset": bad, "next_offset": bad + count}
        assert str(bad) in event.error().str()

        # Halted: nothing more arrives, the position stays at the bad batch, no repeated event.
        assert consumer.poll(1.0) is None
        assert consumer.position([tp])[0].offset == bad
        with pytest.raises(CorruptRecordError):  # seek to the same place: reported again
            consumer.seek(TopicPartition(topic, 0, bad))
            wait_until(lambda: consumer.poll_batch(0.2) is not None, 10, 0, "poll_batch to raise")

        consumer.seek(TopicPartition(topic, 0, bad + count))
        after = []
        wait_until(lambda: after.extend(m for m in consumer.consume(100, 0.2) if m.error() is None)
                   or len(after) >= total - bad - count, 30, 0, "records after the bad batch")
        assert [m.offset() for m in after] == list(range(bad + count, total))
        assert [m.value() for m in after] == [f"b{i}".encode() for i in range(total - bad - count)]
    finally:
        consumer.close()


@pytest.mark.parametrize("api", ["poll", "consume"])
def test_consumer_stops_at_a_batch_it_cannot_decode(shared_broker, topic_name, api):
    servers = shared_broker.bootstrap
    create(servers, topic_name)
    raw = Raw(servers)
    try:
        produce_values(raw, topic_name, [b"a0", b"a1"])
        produce_values(raw, topic_name, [b"a2", b"a3", b"a4"])
        error, bad = raw.produce(topic_name, bad_values_batch())
        assert error is None and bad == 5, "the header-only checks store this batch"
        produce_values(raw, topic_name, [b"b0", b"b1"])
        produce_values(raw, topic_name, [b"b2"])
    finally:
        raw.close()
    check_halts_at_bad_batch(servers, topic_name, bad=5, count=3, total=11, api=api)


def test_consumer_stops_at_a_batch_damaged_on_disk(broker_factory, topic_name):
    """check.crcs: a byte flipped in a stored batch's values (after a clean stop) is reported at
    its offset; the records around it are delivered."""
    broker = broker_factory()
    create(broker.bootstrap, topic_name)
    raw = Raw(broker.bootstrap)
    try:
        produce_values(raw, topic_name, [b"a0", b"a1", b"a2"])
        produce_values(raw, topic_name, [b"victim0", b"victim1"])
        produce_values(raw, topic_name, [b"b0", b"b1", b"b2", b"b3"])
    finally:
        raw.close()
    assert broker.stop() == 0
    [segment] = glob.glob(os.path.join(broker.data_dir, f"{topic_name}-0", "*.log"))
    with open(segment, "r+b") as f:
        data = bytearray(f.read())
        at = data.index(b"victim1")
        data[at] ^= 0x01
        f.seek(0)
        f.write(data)
    broker.restart()
    check_halts_at_bad_batch(broker.bootstrap, topic_name, bad=3, count=2, total=9, api="poll")
