"""The producer's per-partition send policy, driven directly: a ManualClock, no thread, no broker."""
from __future__ import annotations

import pytest

from broker.client.producer_batch import ProducerBatch
from broker.client.send_policy import SendLimits, SendPolicy
from broker.client.transactions import TransactionManager, TxnState
from broker.clock import ManualClock
from broker.errors import (InvalidProducerEpochError, KafkaTimeoutError, NetworkError, NotLeaderOrFollowerError,
                           ProducerFencedError, UnknownProducerIdError)
from tests.simulation.producer_sim import _Records

pytestmark = pytest.mark.unit
KEY = ("t", 0)


def policy(**limits):
    manager = TransactionManager()
    manager.new_epoch(9, 0)
    return SendPolicy(SendLimits(**{"idempotent": True, "backoff": 0.0, **limits}), ManualClock(), manager)


def enqueue(p, n, first=0):
    for i in range(first, first + n):
        p.enqueue(ProducerBatch("t", 0, b"", _Records([i]), None, p.clock.monotonic(), size=100))


def ids(batches):
    return [i for _, taken in batches for b in taken for i in b.records.ids]


def test_sequence_numbers_come_from_the_manager_when_a_batch_is_first_sent():
    p = policy()
    enqueue(p, 3)
    batches, _ = p.take([KEY], p.clock.monotonic())
    assert [(b.base_sequence, b.producer_epoch) for _, t in batches for b in t] == [(0, 0), (1, 0), (2, 0)]


def test_an_idempotent_partition_keeps_its_unanswered_batches_within_the_window():
    p = policy(window=4)
    enqueue(p, 10)
    batches, _ = p.take([KEY], 0.0)
    p.dispatched(0, batches)
    assert len(ids(batches)) == 4 and p.unanswered(KEY) == 4 and p.muted(KEY, 0, 0.0)
    p.answered(0, [batches])
    assert not p.muted(KEY, 0, 0.0)


def test_a_failed_request_goes_back_in_produce_order_and_the_partition_sends_one_at_a_time():
    p = policy(max_request=100)
    enqueue(p, 4)
    sent = []
    for _ in range(3):
        batches, _ = p.take([KEY], 0.0)
        p.dispatched(0, batches)
        sent.append(batches)
    p.answered(0, sent[:2])
    for batches in sent[:2]:
        assert p.failed(KEY, batches[0][1], NetworkError("broken"), 0.0)[0] == []
    assert [b.records.ids[0] for b in p.partitions[KEY].queue] == [0, 1, 3]
    assert p.muted(KEY, 0, 0.0), "a retrying partition with a request unanswered sends nothing more"
    resend, _ = p.take([KEY], 0.0)
    assert ids(resend) == [0], "an idempotent resend goes alone"


def test_a_partition_settles_after_a_retriable_failure_before_pipelining_again():
    p = policy(max_request=100, settle_time=2.0)
    enqueue(p, 3)
    first, _ = p.take([KEY], 0.0)
    p.dispatched(0, first)
    p.answered(0, [first])
    p.failed(KEY, first[0][1], NotLeaderOrFollowerError("moved"), 0.0)
    again, _ = p.take([KEY], 0.0)
    p.dispatched(0, again)
    p.answered(0, [again])
    p.delivered(KEY)
    third, _ = p.take([KEY], 0.0)
    p.dispatched(0, third)
    assert p.muted(KEY, 0, 1.9) and not p.muted(KEY, 0, 2.0)


def test_batches_past_the_delivery_timeout_are_given_up_and_need_a_new_epoch_if_sent():
    p = policy(delivery_timeout=1.0, max_request=100)
    enqueue(p, 2)
    sent, _ = p.take([KEY], 0.0)
    p.dispatched(0, sent)
    p.answered(0, [sent])
    p.failed(KEY, sent[0][1], NetworkError("broken"), 0.0)  # requeued, numbered
    p.clock.advance(1_000)
    expired = p.expire(p.clock.monotonic())
    assert [type(e) for _, e in expired] == [KafkaTimeoutError, KafkaTimeoutError]
    assert p.manager.needs_producer_id(), "a sent batch was given up: its sequence has a gap"


def test_a_partition_that_forgot_the_producer_is_retried_under_a_new_epoch():
    p = policy()
    enqueue(p, 1)
    sent, _ = p.take([KEY], 0.0)
    p.dispatched(0, sent)
    p.answered(0, [sent])
    given_up, _ = p.failed(KEY, sent[0][1], UnknownProducerIdError("forgotten"), 0.0)
    assert given_up == [] and p.manager.needs_producer_id()
    assert p.manager.awaiting_epoch() == [KEY] and p.epoch_bump_due()
    p.manager.new_epoch(9, 1)
    resent, _ = p.take([KEY], 0.0)
    assert [(b.base_sequence, b.producer_epoch) for _, t in resent for b in t] == [(0, 1)]


def test_a_broken_stream_blocks_its_node_until_its_requests_are_reported():
    p = policy(max_in_flight=5)
    assert not p.node_blocked(0, stream_broken=True)
    enqueue(p, 1)
    batches, _ = p.take([KEY], 0.0)
    p.dispatched(0, batches)
    assert p.node_blocked(0, stream_broken=True) and not p.node_blocked(0, stream_broken=False)


# ------------------------------------------------------------------------------ epoch bumps (KIP-360)
OTHER = ("t", 1)


def enqueue_to(p, key, *record_ids):
    for i in record_ids:
        p.enqueue(ProducerBatch(key[0], key[1], b"", _Records([i]), None, p.clock.monotonic(), size=100))


def send(p, keys):
    batches, _ = p.take(keys, p.clock.monotonic())
    p.dispatched(0, batches)
    return batches


def numbering(batches):
    return [(key[1], b.producer_epoch, b.base_sequence) for key, taken in batches for b in taken]


def fail(p, batches, error):
    """Answer one request with ``error`` for each of its partitions; what was given up."""
    p.answered(0, [batches])
    return [b for key, taken in batches for b in p.failed(key, taken, error, p.clock.monotonic())[0]]


def test_the_bump_waits_until_the_partition_that_needs_it_has_nothing_in_flight():
    p = policy(max_request=100)
    enqueue_to(p, KEY, 0, 1, 2)
    first, second = send(p, [KEY]), send(p, [KEY])
    assert fail(p, first, UnknownProducerIdError("forgotten")) == []
    assert p.manager.needs_producer_id() and p.muted(KEY, 0, p.clock.monotonic())
    assert not p.epoch_bump_due(), "its second request is unanswered: its answer decides what is renumbered"
    fail(p, second, UnknownProducerIdError("forgotten"))
    assert p.epoch_bump_due()
    p.manager.new_epoch(9, 1)
    assert not p.manager.needs_producer_id()
    assert numbering(send(p, [KEY])) == [(0, 1, 0)], "every batch it holds, from 0 under the new epoch"


def test_a_bump_numbers_the_other_partitions_from_0_after_their_old_epoch_batches():
    p = policy()
    enqueue_to(p, KEY, 0, 1)
    enqueue_to(p, OTHER, 10, 11)
    refused = send(p, [KEY])                 # partition 0 forgot the producer
    other = send(p, [OTHER])                 # partition 1's pair, numbered under epoch 0, in flight
    enqueue_to(p, OTHER, 12, 13)             # queued, never sent
    fail(p, refused, UnknownProducerIdError("forgotten"))
    assert p.epoch_bump_due()
    p.manager.new_epoch(9, 1)
    # Every batch partition 0 holds is numbered again from 0 under the new epoch (a resend goes alone).
    assert numbering(send(p, [KEY])) == [(0, 1, 0)]
    assert [b.base_sequence for b in p.partitions[KEY].queue] == [None]
    assert p.muted(OTHER, 0, p.clock.monotonic()), "nothing of the new epoch while the old one is unanswered there"
    assert fail(p, other, NetworkError("answer lost")) == []
    for expected in [(1, 0, 0), (1, 0, 1)]:  # a resend keeps its old numbering: the broker may hold it
        resend = send(p, [OTHER])
        assert numbering(resend) == [expected] and p.muted(OTHER, 0, p.clock.monotonic())
        p.answered(0, [resend])
        p.delivered(OTHER)
    assert numbering(send(p, [OTHER])) == [(1, 1, 0), (1, 1, 1)], "then the new epoch, from 0"


def test_queued_batches_of_a_stale_partition_start_from_0_under_the_new_epoch():
    p = policy()
    enqueue_to(p, KEY, 0)
    enqueue_to(p, OTHER, 10, 11)
    refused, delivered = send(p, [KEY]), send(p, [OTHER])
    enqueue_to(p, OTHER, 12, 13)
    fail(p, refused, UnknownProducerIdError("forgotten"))
    p.manager.new_epoch(9, 1)
    assert numbering(delivered) == [(1, 0, 0), (1, 0, 1)]
    p.answered(0, [delivered])
    p.delivered(OTHER)
    assert numbering(send(p, [OTHER])) == [(1, 1, 0), (1, 1, 1)]


def test_a_stale_epoch_refusal_after_a_bump_is_retried_not_given_up():
    p = policy()
    enqueue_to(p, KEY, 0)
    enqueue_to(p, OTHER, 10)
    refused, old = send(p, [KEY]), send(p, [OTHER])
    fail(p, refused, UnknownProducerIdError("forgotten"))
    p.manager.new_epoch(9, 1)
    assert fail(p, old, InvalidProducerEpochError("epoch 1 has taken over")) == []
    assert numbering(send(p, [OTHER])) == [(1, 1, 0)], "numbered again from 0 under the new epoch"
    assert not p.manager.needs_producer_id(), "the partition starts over under the epoch the producer has"


def test_a_transactional_producer_refused_for_its_epoch_is_fenced_whatever_its_epoch():
    manager = TransactionManager("app-1")
    manager.new_epoch(9, 0)
    manager.move(TxnState.READY)
    manager.begin()
    p = SendPolicy(SendLimits(idempotent=True, backoff=0.0), ManualClock(), manager)
    enqueue_to(p, KEY, 0)
    sent = send(p, [KEY])
    manager.new_epoch(9, 1)  # as the coordinator's answer after an abort would
    p.answered(0, [sent])
    given_up, error = p.failed(KEY, sent[0][1], InvalidProducerEpochError("epoch 2 has taken over"), 0.0)
    assert len(given_up) == 1 and isinstance(error, ProducerFencedError) and manager.state is TxnState.FATAL_ERROR
