"""kill -9 during heavy produce: every acknowledged record survives, in order, and no partial batch
is ever served."""
from __future__ import annotations

import collections
import threading
import time

import pyarrow as pa
import pytest

from broker.client import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from broker.client import producer as producer_module
from broker.client.accumulator import ProducerBatch, TopicBuffer
from broker.client.config import PRODUCER_CONFIG
from broker.errors import NetworkError
from broker.proto import riverlog_pb2 as pb
from tests.conftest import wait_until
from tests.integration.test_produce_consume import create

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(300)]

PARTITIONS = 3


class AckedLog:
    """What the producer was told: (partition, offset) -> value, from delivery reports."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acked: dict[tuple[int, int], bytes] = {}
        self.failed = 0

    def on_delivery(self, err, msg):
        with self.lock:
            if err is None:
                self.acked[(msg.partition(), msg.offset())] = msg.value()
            else:
                self.failed += 1

    def count(self) -> int:
        with self.lock:
            return len(self.acked)


def produce_until(producer: Producer, topic: str, stop: threading.Event, counter: list) -> None:
    value = b"x" * 200
    while not stop.is_set():
        try:
            producer.produce(topic, value=b"%012d:" % counter[0] + value, key=b"k%d" % (counter[0] % 50))
            counter[0] += 1
        except BufferError:
            producer.poll(0.05)
        if counter[0] % 500 == 0:
            producer.poll(0)


@pytest.mark.parametrize("acks", ["1", "all"])
def test_kill9_during_heavy_produce_loses_nothing_acknowledged(broker_factory, topic_name, acks):
    broker = broker_factory({"log.segment.bytes": 256 * 1024})
    create(broker.bootstrap, topic_name, PARTITIONS)
    acked = AckedLog()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": acks, "linger.ms": 2,
                         "batch.size": 64 * 1024, "retries": 1_000_000, "delivery.timeout.ms": 120_000,
                         "on_delivery": acked.on_delivery})
    stop, counter = threading.Event(), [0]
    writer = threading.Thread(target=produce_until, args=(producer, topic_name, stop, counter), daemon=True)
    writer.start()
    try:
        for round_ in range(3):
            target = acked.count() + 20_000
            wait_until(lambda: producer.poll(0.05) is not None and acked.count() >= target, timeout=60,
                       message=f"{target} acknowledged records before kill {round_ + 1}")
            broker.kill9()
            broker.restart()
    finally:
        stop.set()
        writer.join(30)
    assert producer.flush(120) == 0
    producer.close()
    assert acked.failed == 0

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "check.crcs": True})
    consumer.assign([TopicPartition(topic_name, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    stored: dict[tuple[int, int], bytes] = {}
    ends = {}
    for p in range(PARTITIONS):
        ends[p] = consumer.get_watermark_offsets(TopicPartition(topic_name, p), 10)[1]
    deadline = time.monotonic() + 120
    while len(stored) < sum(ends.values()) and time.monotonic() < deadline:
        for m in consumer.consume(10_000, 1.0):
            assert m.error() is None, m.error()
            stored[(m.partition(), m.offset())] = m.value()
    consumer.close()

    assert len(stored) == sum(ends.values()), "offsets below the log end could not all be read"
    missing = [k for k, v in acked.acked.items() if stored.get(k) != v]
    assert not missing, f"{len(missing)} acknowledged records lost or changed, e.g. {missing[:3]}"
    for p in range(PARTITIONS):
        # Without idempotence a retry may write a batch twice (its first write landed but the answer
        # was lost in the kill): duplicates are allowed, reordering is not.
        sequence = [int(stored[(p, o)].split(b":")[0]) for o in range(ends[p])]
        seen, firsts = set(), []
        for n in sequence:
            if n not in seen:
                seen.add(n)
                firsts.append(n)
        wrong = [i for i in range(1, len(firsts)) if firsts[i] < firsts[i - 1]]
        assert not wrong, (f"partition {p} is out of produce order after recovery: "
                           f"{firsts[max(0, wrong[0] - 3): wrong[0] + 3]}")


class _OfflineProducer:
    """What the sender uses of a Producer, without threads or a broker."""

    def __init__(self):
        self.config = PRODUCER_CONFIG.parse({"bootstrap.servers": "127.0.0.1:1", "max.request.size": 1024,
                                             "retry.backoff.ms": 0})
        self._acks = -1
        self._linger = 0.0
        self._buffers = {}
        self._cond = threading.Condition()
        self.cluster = self
        self.reported = []

    def leader(self, topic, partition):
        return 0

    def stub(self, node):
        return None

    def _report(self, batch, error, base_offset=-1, log_append_time=-1):
        self.reported.append((batch, error))


class _FakeStream:
    def __init__(self, node, stub, on_event):
        self.node, self.on_event = node, on_event
        self.dead = False
        self.sent = []

    def send(self, request, batches):
        if self.dead:  # as _ProduceStream: a request sent on a broken stream fails at once
            self.on_event(self.node, [(batches, None)], NetworkError("the produce stream broke"))
        else:
            self.sent.append(batches)


def test_a_broken_streams_reports_in_either_order_requeue_its_batches_in_produce_order(monkeypatch):
    """The interleaving behind a reorder after kill -9: the reader thread reports the broken stream's
    pending requests, then send() reports the request it found the stream dead for (a newer one).
    Each report used to put its batches back at the front of the queue, the newer ones last, i.e.
    first: they were then written before the older ones."""
    monkeypatch.setattr(producer_module, "_ProduceStream", _FakeStream)
    sender = producer_module._Sender(_OfflineProducer())
    key = ("t", 0)
    batches = [ProducerBatch("t", 0, b"x" * 600, pa.record_batch([pa.array([i])], names=["v"]), None,
                             time.monotonic(), size=600) for i in range(6)]
    for batch in batches:
        batch.sequence = next(sender.sequence)
    sender.queues[key] = collections.deque(batches)

    def ids(sent):  # the batches of each request sent, by index in produce order
        return [[b.records.column(0)[0].as_py() for b in r[0][1]] for r in sent]

    for _ in range(3):  # one batch per request (max.request.size), one request per pass
        sender._send(time.monotonic())
    stream = sender.streams[0]
    requests = stream.sent
    assert ids(requests) == [[0], [1], [2]]

    broken = NetworkError("the produce stream broke")
    stream.dead = True
    sender._complete(0, [(requests[0], None), (requests[1], None)], broken)  # the reader's report
    sender._send(time.monotonic())
    assert sender.streams[0] is stream, "sent on a new stream before every failure was requeued"
    # The stream may also break between _send's check and the dispatch: the request must not go
    # on a new stream then either, but fail with the broken one.
    request, taken, _ = sender._build_request([key])
    sender._dispatch(0, request, taken)
    assert sender.streams[0] is stream and len(sender.completions) == 1
    sender._complete(*sender.completions.popleft())
    sender._complete(0, [(requests[2], None)], broken)  # send()'s report, after the reader's
    assert [b.records.column(0)[0].as_py() for b in sender.queues[key]] == [0, 1, 2, 3, 4, 5]

    # While the retry is unanswered, no later batch of the partition is sent.
    for _ in range(3):
        sender._send(time.monotonic())
    retry_stream = sender.streams[0]
    assert retry_stream is not stream and ids(retry_stream.sent) == [[0]]

    response = pb.ProduceResponse()
    response.topics.add(name="t").partitions.add(partition=0, base_offset=0)
    for answered in (1, 2):
        sender._complete(0, [(retry_stream.sent[-1], response)], None)
        sender._send(time.monotonic())
        sender._send(time.monotonic())
        assert ids(retry_stream.sent) == [[i] for i in range(answered + 1)]
    # Once no retried batch is left, the partition's requests are pipelined again.
    sender._complete(0, [(retry_stream.sent[-1], response)], None)
    for _ in range(3):
        sender._send(time.monotonic())
    assert ids(retry_stream.sent) == [[i] for i in range(6)] and not sender.queues[key]
    assert sender.in_flight[0] == 3 and not sender.retrying


def test_records_held_while_metadata_is_unavailable_stay_before_newer_ones():
    """Records drained while the broker is down go back into the producer's buffer ahead of those
    produced since; produce() must then go on appending behind the newest, not to the held chunk."""
    p = _OfflineProducer()
    sender = producer_module._Sender(p)

    def buffer(values):
        buf = TopicBuffer()
        for v in values:
            buf.open_rows(time.monotonic()).append((None, v, 0, None, -1, None))
            buf.count += 1
        return buf

    held = buffer([0, 1])
    p._buffers["t"] = buffer([2, 3])  # produced while the sender was looking the topic up
    sender._hold_unknown("t", held, NetworkError("Metadata: no broker answered"))
    p._buffers["t"].open_rows(time.monotonic()).append((None, 4, 0, None, -1, None))
    assert [row[1] for chunk in p._buffers["t"].chunks for row in chunk.rows] == [0, 1, 2, 3, 4]
