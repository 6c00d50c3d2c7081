"""Where a consumer starts, stops and commits, as confluent-kafka's (librdkafka's) does: assign()
without an offset starts at the committed offset, a paused partition returns nothing, stored
offsets belong to the assignment, an argument-less commit sends only what moved, OFFSET_TAIL works,
and a closed consumer refuses every call."""
from __future__ import annotations

import time

import pytest

import broker.client.fetcher as fetcher_module
from broker.client import (AdminClient, Consumer, KafkaError, KafkaException, Message, NewTopic, Producer,
                           TopicPartition)
from broker.client.message import OFFSET_BEGINNING, OFFSET_END, OFFSET_INVALID, OFFSET_STORED
from broker.errors import InvalidRequestError
from tests.conftest import wait_until


def _create(servers: str, name: str, partitions: int = 1) -> None:
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def _produce(servers: str, topic: str, n: int, partition: int = 0) -> None:
    p = Producer({"bootstrap.servers": servers})
    for i in range(n):
        p.produce(topic, value=f"v{i}".encode(), partition=partition)
    p.flush(30)


def _records(c: Consumer, n: int, timeout: float = 20.0) -> list[Message]:
    """The next ``n`` records (error events are not records)."""
    out: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None and m.error() is None:
            out.append(m)
    assert len(out) == n, f"got {len(out)} of {n} records"
    return out


def _event(c: Consumer, timeout: float = 20.0) -> Message:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = c.poll(0.2)
        if m is not None:
            assert m.error() is not None, f"expected an error event, got a record at {m.offset()}"
            return m
    raise AssertionError("no error event")


def _code(call, *args, **kwargs) -> int:
    try:
        call(*args, **kwargs)
    except KafkaException as e:
        return e.args[0].code()
    raise AssertionError(f"{call.__name__} must fail")


def _config(servers: str, group: str, **extra) -> dict:
    return {"bootstrap.servers": servers, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", **extra}


# ------------------------------------------------------------------------------ 1. assign() from the committed offset
@pytest.mark.parametrize("offset", [OFFSET_INVALID, OFFSET_STORED])
def test_assign_without_an_offset_starts_at_the_committed_offset(shared_broker, topic_name, offset):
    """rd_kafka_assignment_serve_pending: OffsetFetch first, auto.offset.reset only without a commit."""
    servers = shared_broker.bootstrap
    _create(servers, topic_name)
    _produce(servers, topic_name, 20)
    with Consumer(_config(servers, topic_name)) as c:
        c.commit(offsets=[TopicPartition(topic_name, 0, 12)], asynchronous=False)
    with Consumer(_config(servers, topic_name)) as c:
        c.assign([TopicPartition(topic_name, 0, offset)])
        assert _records(c, 1)[0].offset() == 12
    with Consumer(_config(servers, topic_name + "-none")) as c:  # nothing committed: earliest
        c.assign([TopicPartition(topic_name, 0, offset)])
        assert _records(c, 1)[0].offset() == 0


def test_a_subscription_still_starts_at_the_committed_offset(shared_broker, topic_name):
    servers = shared_broker.bootstrap
    _create(servers, topic_name)
    _produce(servers, topic_name, 10)
    with Consumer(_config(servers, topic_name)) as c:
        c.commit(offsets=[TopicPartition(topic_name, 0, 7)], asynchronous=False)
        c.subscribe([topic_name])
        assert _records(c, 1)[0].offset() == 7


# ------------------------------------------------------------------------------ 2. pause
def test_a_paused_partition_returns_nothing_and_resume_loses_and_repeats_nothing(shared_broker, topic_name):
    servers = shared_broker.bootstrap
    _create(servers, topic_name, 2)
    _produce(servers, topic_name, 20, partition=0)
    _produce(servers, topic_name, 5, partition=1)
    tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    with Consumer(_config(servers, topic_name)) as c:
        c.assign([TopicPartition(topic_name, 0, 0)])
        assert _records(c, 1)[0].offset() == 0
        wait_until(lambda: c.get_watermark_offsets(tp0, cached=True)[1] == 20, message="p0 prefetched")
        c.pause([tp0])
        c.incremental_assign([TopicPartition(topic_name, 1, 0)])
        during = _records(c, 5)  # p1's records arrive: anything of p0 would have come first
        assert {m.partition() for m in during} == {1}
        assert c.poll(0.5) is None
        assert c.position([tp0])[0].offset == 1
        c.resume([tp0])
        assert [m.offset() for m in _records(c, 19)] == list(range(1, 20))
        assert c.position([tp1])[0].offset == 5


# ------------------------------------------------------------------------------ 3. stored offsets
def test_stored_offsets_belong_to_the_assignment(shared_broker, topic_name):
    servers = shared_broker.bootstrap
    _create(servers, topic_name, 2)
    _produce(servers, topic_name, 10)
    with Consumer(_config(servers, topic_name, **{"enable.auto.offset.store": False})) as c:
        c.assign([TopicPartition(topic_name, 0, 0)])
        message = _records(c, 3)[-1]
        assert _code(c.store_offsets, offsets=[TopicPartition(topic_name, 1, 4)]) == KafkaError._STATE
        c.store_offsets(message)
        c.unassign()
        c.assign([TopicPartition(topic_name, 0, 0)])  # a new assignment starts with nothing stored
        assert _code(c.commit, asynchronous=False) == KafkaError._NO_OFFSET
        c.store_offsets(offsets=[TopicPartition(topic_name, 0, 2)])
        c.commit(asynchronous=False)
        committed = c.committed([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)])
        assert [tp.offset for tp in committed] == [2, OFFSET_INVALID]


# ------------------------------------------------------------------------------ 4. argument-less commit
def test_an_argument_less_commit_sends_only_what_moved(shared_broker, topic_name):
    servers = shared_broker.bootstrap
    _create(servers, topic_name)
    _produce(servers, topic_name, 3)
    outcomes = []
    config = _config(servers, topic_name, on_commit=lambda err, tps: outcomes.append((err, tps)))
    with Consumer(config) as c:
        c.assign([TopicPartition(topic_name, 0, 0)])
        _records(c, 3)
        assert [tp.offset for tp in c.commit(asynchronous=False)] == [3]
        assert _code(c.commit, asynchronous=False) == KafkaError._NO_OFFSET
        c.commit()  # asynchronous: on_commit hears _NO_OFFSET
        wait_until(lambda: c.consume(0, 0) == [] and outcomes, message="on_commit")
        assert outcomes[-1][0].code() == KafkaError._NO_OFFSET
        assert c.commit(offsets=[TopicPartition(topic_name, 0, 3)], asynchronous=False)[0].offset == 3
        _produce(servers, topic_name, 1)
        _records(c, 1)
        assert [tp.offset for tp in c.commit(asynchronous=False)] == [4]


def test_assign_from_the_committed_offset_has_nothing_new_to_commit(shared_broker, topic_name):
    servers = shared_broker.bootstrap
    _create(servers, topic_name)
    _produce(servers, topic_name, 10)
    with Consumer(_config(servers, topic_name)) as c:
        c.commit(offsets=[TopicPartition(topic_name, 0, 5)], asynchronous=False)
    with Consumer(_config(servers, topic_name)) as c:
        c.assign([TopicPartition(topic_name, 0)])
        wait_until(lambda: c.position([TopicPartition(topic_name, 0)])[0].offset == 5, message="position")
        assert _code(c.commit, asynchronous=False) == KafkaError._NO_OFFSET


# ------------------------------------------------------------------------------ 5. OFFSET_TAIL
def OFFSET_TAIL(n: int) -> int:
    return -2000 - n


def test_offset_tail_starts_n_before_the_end_and_stalls_no_other_partition(shared_broker, topic_name):
    servers = shared_broker.bootstrap
    _create(servers, topic_name, 2)
    _produce(servers, topic_name, 10, partition=0)
    _produce(servers, topic_name, 10, partition=1)
    with Consumer(_config(servers, topic_name)) as c:
        c.assign([TopicPartition(topic_name, 0, OFFSET_TAIL(3)), TopicPartition(topic_name, 1, 0)])
        got = _records(c, 13)
        assert sorted(m.offset() for m in got if m.partition() == 0) == [7, 8, 9]
        c.seek(TopicPartition(topic_name, 0, OFFSET_TAIL(50)))  # floored at the log start
        assert [m.offset() for m in _records(c, 10)] == list(range(10))


def test_a_start_offset_listoffsets_refuses_is_that_partitions_error_only(shared_broker, topic_name, monkeypatch):
    servers = shared_broker.bootstrap
    _create(servers, topic_name, 2)
    _produce(servers, topic_name, 5, partition=0)
    _produce(servers, topic_name, 5, partition=1)
    real = fetcher_module.list_offset

    def refusing(cluster, config, topic, partition, timestamp, timeout=None):
        if partition == 0:
            raise InvalidRequestError(f"no offset for timestamp {timestamp}")
        return real(cluster, config, topic, partition, timestamp, timeout)

    monkeypatch.setattr(fetcher_module, "list_offset", refusing)
    with Consumer(_config(servers, topic_name)) as c:
        c.assign([TopicPartition(topic_name, 0, OFFSET_END), TopicPartition(topic_name, 1, OFFSET_BEGINNING)])
        seen, records = [], []
        deadline = time.monotonic() + 20
        while len(records) < 5 and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is not None:
                (records if m.error() is None else seen).append(m)
        assert [m.offset() for m in records] == list(range(5))
        # no offset (librdkafka's OFFSET_INVALID): None, as confluent-kafka's Message.offset() gives it
        assert [(m.partition(), m.offset()) for m in seen] == [(0, None)]
        assert isinstance(seen[0].error().exception(), InvalidRequestError)


# ------------------------------------------------------------------------------ 6, 7. seek and a closed consumer
def test_seek_refuses_what_librdkafka_refuses(shared_broker, topic_name):
    servers = shared_broker.bootstrap
    _create(servers, topic_name, 2)
    with Consumer(_config(servers, topic_name)) as c:
        c.assign([TopicPartition(topic_name, 0, 0)])
        assert _code(c.seek, TopicPartition(topic_name, 0, OFFSET_STORED)) == KafkaError._INVALID_ARG
        assert _code(c.seek, TopicPartition(topic_name, 0, -5)) == KafkaError._INVALID_ARG
        c.list_topics(topic_name, 10)
        assert _code(c.seek, TopicPartition(topic_name, 1, 3)) == KafkaError._STATE
        assert _code(c.seek, TopicPartition(topic_name + "-nope", 0, 3)) == KafkaError._UNKNOWN_PARTITION
        assert c.position([TopicPartition(topic_name, 0)])[0].offset == 0


def test_every_method_of_a_closed_consumer_raises_runtime_error(shared_broker, topic_name):
    c = Consumer(_config(shared_broker.bootstrap, topic_name))
    c.close()
    tp = TopicPartition(topic_name, 0, 0)
    calls = [lambda: c.poll(0), lambda: c.consume(1, 0), lambda: c.commit(asynchronous=False),
             lambda: c.seek(tp), lambda: c.position([tp]), c.assignment, lambda: c.pause([tp]),
             lambda: c.resume([tp]), c.unsubscribe, c.memberid, lambda: c.committed([tp]),
             lambda: c.store_offsets(offsets=[tp]), lambda: c.assign([tp]), lambda: c.subscribe([topic_name]),
             lambda: c.get_watermark_offsets(tp, cached=True), c.consumer_group_metadata, c.unassign,
             lambda: c.poll_batch(0)]
    for call in calls:
        with pytest.raises(RuntimeError, match="Consumer closed"):
            call()
    c.close()  # a second close does nothing


# ------------------------------------------------------------------------------ 8. max.poll.interval.ms
def test_a_late_poll_first_returns_max_poll_exceeded(shared_broker, topic_name):
    servers = shared_broker.bootstrap
    _create(servers, topic_name)
    _produce(servers, topic_name, 5)
    with Consumer(_config(servers, topic_name, **{"max.poll.interval.ms": 1500, "session.timeout.ms": 6000,
                                                  "heartbeat.interval.ms": 200})) as c:
        c.subscribe([topic_name])
        _records(c, 1)
        wait_until(lambda: c.memberid() is None, timeout=20, message="the member left for a late poll")
        error = _event(c).error()
        assert error.code() == KafkaError._MAX_POLL_EXCEEDED
        assert error.str().startswith("Application maximum poll interval (1500ms) exceeded by ")


# ------------------------------------------------------------------------------ 9, 10. positions and watermarks
def test_positions_and_cached_watermarks_before_any_fetch(shared_broker, topic_name):
    servers = shared_broker.bootstrap
    _create(servers, topic_name, 2)
    c = Consumer(_config(servers, topic_name, **{"auto.offset.reset": "error"}))
    try:  # nothing committed and auto.offset.reset=error: the partitions never get a position
        c.assign([TopicPartition(topic_name, 0, OFFSET_STORED), TopicPartition(topic_name, 1, OFFSET_STORED)])
        positions = c.position([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)])
        assert [tp.offset for tp in positions] == [OFFSET_INVALID, OFFSET_INVALID]
        assert c.get_watermark_offsets(TopicPartition(topic_name, 0), cached=True) == (OFFSET_INVALID, OFFSET_INVALID)
        assert _code(c.get_watermark_offsets, TopicPartition(topic_name + "-nope", 0), cached=True) \
            == KafkaError._UNKNOWN_PARTITION
    finally:
        c.close()


# ------------------------------------------------------------------------------ 11. auto.offset.reset=error
def test_auto_offset_reset_error_reports_the_offset_and_seek_restarts_the_partition(shared_broker, topic_name):
    servers = shared_broker.bootstrap
    _create(servers, topic_name)
    _produce(servers, topic_name, 10)
    with Consumer(_config(servers, topic_name, **{"auto.offset.reset": "error"})) as c:
        c.assign([TopicPartition(topic_name, 0)])
        event = _event(c)
        assert (event.error().code(), event.offset()) == (KafkaError._AUTO_OFFSET_RESET, None)   # OFFSET_INVALID
        c.seek(TopicPartition(topic_name, 0, 2))
        assert [m.offset() for m in _records(c, 8)] == list(range(2, 10))
        c.seek(TopicPartition(topic_name, 0, 500))
        event = _event(c)
        assert (event.error().code(), event.offset()) == (KafkaError._AUTO_OFFSET_RESET, 500)


# ------------------------------------------------------------------------------ 12. small things
def test_consume_bounds_and_message_setters(shared_broker, topic_name):
    with Consumer(_config(shared_broker.bootstrap, topic_name)) as c:
        for n in (-1, 1_000_001):
            with pytest.raises(ValueError, match=r"num_messages must be between 0 and 1000000 \(1M\)"):
                c.consume(n, 0)
        assert c.consume(0, 0) == []
    m = Message("a", 0, 1, b"k", b"v")
    m.set_topic("b")
    m.set_error(KafkaError(KafkaError._PARTITION_EOF))
    assert m.topic() == "b" and m.error().code() == KafkaError._PARTITION_EOF
