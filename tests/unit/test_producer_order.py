"""The producer's sender keeps each partition in produce order across broken streams, broker
restarts and retries; run offline: no threads, no broker."""
from __future__ import annotations

import collections
import threading
import time

import pyarrow as pa
import pytest

from broker.client import producer as producer_module
from broker.client.accumulator import ProducerBatch, TopicBuffer
from broker.client.config import PRODUCER_CONFIG
from broker.errors import NetworkError, NotLeaderOrFollowerError
from broker.proto import riverlog_pb2 as pb

pytestmark = pytest.mark.unit


class _OfflineProducer:
    """What the sender uses of a Producer, without threads or a broker."""

    def __init__(self, **config):
        self.config = PRODUCER_CONFIG.parse({"bootstrap.servers": "127.0.0.1:1", "max.request.size": 1024,
                                             "retry.backoff.ms": 0, **config})
        self._acks = -1
        self._idempotent = False  # sequence numbers need a broker's producer id; ordering is what is tested here
        self._txn = None
        self._linger = 0.0
        self._batch_size = self.config["batch.size"]
        self._flushing = 0
        self._closed = False
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


@pytest.fixture
def sender(monkeypatch):
    monkeypatch.setattr(producer_module, "_ProduceStream", _FakeStream)
    return producer_module._Sender(_OfflineProducer())


KEY = ("t", 0)


def queue_batches(sender, n):
    """``n`` batches of partition 0, one per request (600 bytes each, max.request.size 1024)."""
    batches = [ProducerBatch("t", 0, b"x" * 600, pa.record_batch([pa.array([i])], names=["v"]), None,
                             time.monotonic(), size=600) for i in range(n)]
    for batch in batches:
        batch.sequence = next(sender.sequence)
    sender.queues[KEY] = collections.deque(batches)


def ids(requests):
    """The batches of each request sent, by index in produce order."""
    return [[b.records.column(0)[0].as_py() for b in r[0][1]] for r in requests]


def answer(error_code=0):
    response = pb.ProduceResponse()
    response.topics.add(name="t").partitions.add(partition=0, base_offset=0, error_code=error_code)
    return response


def settled(sender):
    """A time at which nothing that happened so far keeps a partition unsteady."""
    return time.monotonic() + sender.settle_time + 1


def test_a_broken_streams_reports_in_either_order_requeue_its_batches_in_produce_order(sender):
    """The reader thread reports the broken stream's pending requests, then send() reports the
    request it found the stream dead for (a newer one): each report puts its batches back at their
    place, not at the front of the queue, where the newer ones would be written first."""
    queue_batches(sender, 6)
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
    request, taken, _ = sender._build_request([KEY])
    sender._dispatch(0, request, taken)
    assert sender.streams[0] is stream and len(sender.completions) == 1
    sender._complete(*sender.completions.popleft())
    sender._complete(0, [(requests[2], None)], broken)  # send()'s report, after the reader's
    assert [b.records.column(0)[0].as_py() for b in sender.queues[KEY]] == [0, 1, 2, 3, 4, 5]

    # While the retry is unanswered, no later batch of the partition is sent.
    for _ in range(3):
        sender._send(time.monotonic())
    retry_stream = sender.streams[0]
    assert retry_stream is not stream and ids(retry_stream.sent) == [[0]]
    for answered in (1, 2):
        sender._complete(0, [(retry_stream.sent[-1], answer())], None)
        sender._send(time.monotonic())
        sender._send(time.monotonic())
        assert ids(retry_stream.sent) == [[i] for i in range(answered + 1)]
    # Once no retried batch is left and the partition has settled, its requests are pipelined again.
    sender._complete(0, [(retry_stream.sent[-1], answer())], None)
    for _ in range(3):
        sender._send(settled(sender))
    assert ids(retry_stream.sent) == [[i] for i in range(6)] and not sender.queues[KEY]
    assert sender.in_flight[0] == 3 and not sender.retrying


class _RestartingBroker:
    """Answers each request in order like one ProduceStream; the first ``failing`` requests after a
    restart fail with NotLeaderOrFollower (the broker loads its logs, is fenced, is made leader
    again), the others are written to ``log``."""

    def __init__(self):
        self.failing = 0
        self.log: list[int] = []

    def answer(self, sender, stream) -> None:
        while sender.in_flight[0]:
            batches = stream.sent[len(stream.sent) - sender.in_flight[0]]
            if self.failing:
                self.failing -= 1
                response = answer(NotLeaderOrFollowerError.code)
            else:
                self.log += [i for group in ids([batches]) for i in group]
                response = answer()
            sender._complete(0, [(batches, response)], None)


@pytest.mark.parametrize("failing", [1, 2])
def test_a_restarted_broker_failing_the_first_requests_does_not_reorder_a_partition(sender, failing):
    """kill -9 while no request was unanswered: the stream to the restarted broker fails the first
    request of a partition (NotLeaderOrFollower) and accepts the next. Requests pipelined on the new
    stream at once were written first, i.e. a batch of the failed request landed after newer ones."""
    queue_batches(sender, 8)
    broker = _RestartingBroker()
    sender._send(time.monotonic())
    old = sender.streams[0]
    broker.answer(sender, old)
    old.dead = True  # killed with no request unanswered: the reader has nothing to report
    broker.failing = failing  # restarted
    while sender.queues[KEY] or sender.in_flight[0]:
        for _ in range(5):
            sender._send(time.monotonic())
        broker.answer(sender, sender.streams[0])
    assert sender.streams[0] is not old
    assert broker.log == list(range(8))


def test_a_partition_failed_alone_sends_one_request_at_a_time_until_it_settles(sender):
    """A per-partition error on an established stream (leadership moving and coming back): the
    partition's later requests wait for each answer until it has gone the settle time without failing."""
    queue_batches(sender, 6)
    sender._send(time.monotonic())
    stream = sender.streams[0]
    sender._complete(0, [(stream.sent[0], answer())], None)
    for _ in range(2):
        sender._send(time.monotonic())
    assert ids(stream.sent) == [[0], [1], [2]]  # steady: pipelined
    sender._complete(0, [(stream.sent[1], answer(NotLeaderOrFollowerError.code))], None)
    sender._complete(0, [(stream.sent[2], answer())], None)  # the caveat: [2] was already in flight
    sender._send(time.monotonic())
    sender._send(time.monotonic())
    assert ids(stream.sent)[3:] == [[1]]
    sender._complete(0, [(stream.sent[3], answer())], None)
    assert not sender.retrying
    sender._send(time.monotonic())
    sender._send(time.monotonic())
    assert ids(stream.sent)[4:] == [[3]], "pipelined again before the partition settled"
    sender._send(time.monotonic() + sender.settle_time)
    assert ids(stream.sent)[4:] == [[3], [4]]


def buffer(values):
    buf = TopicBuffer()
    for v in values:
        buf.open_rows(time.monotonic()).append((None, v, 0, None, -1, None))
        buf.count += 1
    return buf


def test_records_held_while_metadata_is_unavailable_stay_before_newer_ones():
    """Records drained while the broker is down go back into the producer's buffer ahead of those
    produced since; produce() must then go on appending behind the newest, not to the held chunk."""
    p = _OfflineProducer()
    sender = producer_module._Sender(p)
    held = buffer([0, 1])
    p._buffers["t"] = buffer([2, 3])  # produced while the sender was looking the topic up
    sender._hold_unknown("t", held, NetworkError("Metadata: no broker answered"))
    p._buffers["t"].open_rows(time.monotonic()).append((None, 4, 0, None, -1, None))
    assert [row[1] for chunk in p._buffers["t"].chunks for row in chunk.rows] == [0, 1, 2, 3, 4]


def test_held_records_make_the_sender_wait_for_the_retry_backoff_even_while_flushing():
    """flush() makes every buffer ready at once; a held one must still wait retry.backoff.ms, or
    the sender spins looking the unknown topic up."""
    p = _OfflineProducer(**{"retry.backoff.ms": 100})
    sender = producer_module._Sender(p)
    p._flushing = 1
    sender._hold_unknown("t", buffer([0]), NetworkError("Metadata: no broker answered"))
    now = time.monotonic()
    sender._send(now)  # nothing queued to send
    assert 0.05 < sender._wait_time(now) <= 0.1
    assert sender._take_ready(now) == {} and "t" in p._buffers
    assert sender._wait_time(now + 0.1) == 0
    assert list(sender._take_ready(now + 0.1)) == ["t"]
