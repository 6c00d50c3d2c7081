"""The producer's sender keeps each partition in produce order across broken streams, broker
restarts and retries; run offline: no threads, no broker."""
from __future__ import annotations

import time
from types import SimpleNamespace

import pyarrow as pa
import pytest

from broker.client.accumulator import FIELDS, RecordAccumulator, TopicBuffer
from broker.client.producer_batch import ProducerBatch
from broker.client.config import PRODUCER_CONFIG
from broker.client.send_policy import SendLimits
from broker.client.sender import Sender
from broker.errors import BadMessageError, KafkaError, NetworkError, NotLeaderOrFollowerError
from broker.proto import riverlog_pb2 as pb

pytestmark = pytest.mark.unit


class _OfflineCluster:
    """Every topic has one partition; its leader is broker 0, whose stub is never used (streams are faked)."""

    timeout = 30.0   # request.timeout.ms, in seconds

    def leader(self, topic, partition):
        return 0

    def topic(self, name, refresh_if_missing=True, timeout=None):
        return SimpleNamespace(partitions={0: SimpleNamespace(leader=0)})

    def stub(self, node):
        return None


class _FakeStream:
    def __init__(self, node, stub, on_event):
        self.node, self.on_event = node, on_event
        self.dead = False
        self.sent = []

    def send(self, request, batches):
        if self.dead:  # as ProduceStream: a request sent on a broken stream fails at once
            self.on_event(self.node, [(batches, None)], NetworkError("the produce stream broke"))
        else:
            self.sent.append(batches)


def offline_sender(**config):
    """A sender wired to fakes through its constructor: no thread, no broker, no private fields."""
    cfg = PRODUCER_CONFIG.parse({"bootstrap.servers": "127.0.0.1:1", "max.request.size": 1024,
                                 "retry.backoff.ms": 0, **config})
    reported = []
    # Idempotence off: sequence numbers need a broker's producer id; ordering is what is tested here.
    sender = Sender(cfg, SendLimits.from_config(cfg, idempotent=False), -1, _OfflineCluster(),
                    RecordAccumulator(0.0, cfg["batch.size"], cfg["buffer.memory"]),
                    lambda batch, error, *_: reported.append((batch, error)), stream_factory=_FakeStream)
    sender.reported = reported
    return sender


@pytest.fixture
def sender():
    return offline_sender()


KEY = ("t", 0)


def queue_batches(sender, n):
    """``n`` batches of partition 0, one per request (600 bytes each, max.request.size 1024)."""
    batches = [ProducerBatch("t", 0, b"x" * 600, pa.record_batch([pa.array([i])], names=["v"]), None,
                             time.monotonic(), size=600) for i in range(n)]
    for batch in batches:
        sender.policy.enqueue(batch)


def queued(sender):
    return sender.policy.partitions[KEY].queue


def in_flight(sender):
    return sender.policy.node_in_flight[0]


def retrying(sender):
    return any(p.retrying for p in sender.policy.partitions.values())


def ids(requests):
    """The batches of each request sent, by index in produce order."""
    return [[b.records.column(0)[0].as_py() for b in r[0][1]] for r in requests]


def answer(error_code=0):
    response = pb.ProduceResponse()
    response.topics.add(name="t").partitions.add(partition=0, base_offset=0, error_code=error_code)
    return response


def settled(sender):
    """A time at which nothing that happened so far keeps a partition unsteady."""
    return time.monotonic() + sender.policy.limits.settle_time + 1


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
    taken, _ = sender.policy.take([KEY], time.monotonic())
    sender._dispatch(0, sender._request(taken), taken)
    assert sender.streams[0] is stream and len(sender.completions) == 1
    sender._complete(*sender.completions.popleft())
    sender._complete(0, [(requests[2], None)], broken)  # send()'s report, after the reader's
    assert [b.records.column(0)[0].as_py() for b in queued(sender)] == [0, 1, 2, 3, 4, 5]

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
    assert ids(retry_stream.sent) == [[i] for i in range(6)] and not queued(sender)
    assert in_flight(sender) == 3 and not retrying(sender)


class _RestartingBroker:
    """Answers each request in order like one ProduceStream; the first ``failing`` requests after a
    restart fail with NotLeaderOrFollower (the broker loads its logs, is fenced, is made leader
    again), the others are written to ``log``."""

    def __init__(self):
        self.failing = 0
        self.log: list[int] = []

    def answer(self, sender, stream) -> None:
        while in_flight(sender):
            batches = stream.sent[len(stream.sent) - in_flight(sender)]
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
    while queued(sender) or in_flight(sender):
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
    assert not retrying(sender)
    sender._send(time.monotonic())
    sender._send(time.monotonic())
    assert ids(stream.sent)[4:] == [[3]], "pipelined again before the partition settled"
    sender._send(time.monotonic() + sender.policy.limits.settle_time)
    assert ids(stream.sent)[4:] == [[3], [4]]


def buffer(values):
    buf = TopicBuffer(time.monotonic())
    for v in values:
        buf.append_row(None, v, 0)
    return buf


def test_records_held_while_metadata_is_unavailable_stay_before_newer_ones():
    """Records drained while the broker is down go back into the producer's buffer ahead of those
    produced since; produce() must then go on appending behind the newest, not to the held chunk."""
    sender = offline_sender()
    buffers = sender.accumulator.buffers
    held = buffer([0, 1])
    buffers["t"] = buffer([2, 3])  # produced while the sender was looking the topic up
    sender._hold_unknown("t", held, NetworkError("Metadata: no broker answered"))
    buffers["t"].append_row(None, 4, 0)
    assert [value for chunk in buffers["t"].chunks for value in chunk.rows[1::FIELDS]] == [0, 1, 2, 3, 4]


def test_held_records_make_the_sender_wait_for_the_retry_backoff_even_while_flushing():
    """flush() makes every buffer ready at once; a held one must still wait retry.backoff.ms, or
    the sender spins looking the unknown topic up."""
    sender = offline_sender(**{"retry.backoff.ms": 100})
    sender.accumulator.flushing = 1
    sender._hold_unknown("t", buffer([0]), NetworkError("Metadata: no broker answered"))
    now = time.monotonic()
    sender._send(now)  # nothing queued to send
    assert 0.05 < sender.wait_time(now) <= 0.1
    assert sender.accumulator.take_ready(now) == {} and "t" in sender.accumulator.buffers
    assert sender.wait_time(now + 0.1) == 0
    assert list(sender.accumulator.take_ready(now + 0.1)) == ["t"]


def test_a_record_the_sender_cannot_encode_fails_alone_and_the_others_are_sent():
    """A field Arrow refuses (here a str timestamp that reached the buffer) used to fail the whole
    drained buffer in the background: no delivery report, nothing written, flush() never 0."""
    sender = offline_sender()
    buf = TopicBuffer(time.monotonic())
    seen = []
    for value, timestamp in ((b"before", 1), (b"bad", "1"), (b"after", 2)):
        buf.append_row(None, value, timestamp, callback=lambda err, msg: seen.append(msg))
    sender._enqueue("t", buf)
    [(failed, error)] = sender.reported
    assert isinstance(error, BadMessageError) and KafkaError.of(error).code() == KafkaError._BAD_MSG
    assert "could not be encoded" in str(error) and failed.records.column(1).to_pylist() == [b"bad"]
    assert len(failed.callbacks) == 1
    [batch] = queued(sender)
    assert batch.records.column(1).to_pylist() == [b"before", b"after"]
    assert batch.records.column(2).to_pylist() == [1, 2]
