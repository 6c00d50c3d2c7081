"""What a refused batch means for an idempotent producer's numbering (without transactions):
retried, numbered again under a new epoch, or a fatal sequence desynchronisation.

Kept apart from :class:`~broker.client.send_policy.SendPolicy`, which decides when batches go:
these rules only read a refusal against the numbering the
:class:`~broker.client.transactions.TransactionManager` keeps, as librdkafka's
``rd_kafka_handle_idempotent_Produce_error`` and Kafka's ``TransactionManager.handleFailedBatch``
do. Pure.

- **Numbering refused** (KIP-360): a partition that forgot the producer (``UnknownProducerId``),
  or a stale partition refusing a batch for its epoch or sequence: nothing was written, and the
  batches are retried, numbered again (see the send policy's epoch bumps).
- **Sequence desynchronisation**: an ``OutOfOrderSequence`` for a partition's oldest unacknowledged
  batch, numbered under the current epoch with nothing given up or pending before it, means the
  broker lost acknowledged records. The producer fails fatally: that batch is reported with the
  fatal error, and so is every queued record and every later one; batches in flight get their answers.
"""
from __future__ import annotations

from collections.abc import Iterable

from broker.client.producer_batch import ProducerBatch
from broker.client.transactions import TransactionManager
from broker.errors import InvalidProducerEpochError, OutOfOrderSequenceError, RiverlogError, UnknownProducerIdError

Key = tuple[str, int]


def numbering_refused(manager: TransactionManager, key: Key, taken: list[ProducerBatch],
                      error: RiverlogError) -> bool:
    """An idempotent producer's batches refused for their numbering, none of them written: True
    when they are retried numbered again from 0 under a new epoch (or the current one, if the
    partition is stale). An idempotent producer's id is its own, so a newer epoch at the
    partition can only be its own: being refused for a stale epoch is not being fenced."""
    epochs = {b.producer_epoch for b in taken}
    if isinstance(error, UnknownProducerIdError):
        manager.forgotten(key, epochs)
        return True
    if isinstance(error, (InvalidProducerEpochError, OutOfOrderSequenceError)) and manager.stale(key):
        # Out of order on a stale partition, which sends one batch at a time: a real gap.
        manager.renumber(key, epochs)
        return True
    return False


def desynchronised(manager: TransactionManager, key: Key, taken: list[ProducerBatch], error: RiverlogError,
                   in_flight: set[int], queue: Iterable[ProducerBatch]) -> bool:
    """``OutOfOrderSequence`` for the partition's oldest unacknowledged batch (no earlier one
    queued again or unanswered: ``in_flight``, the produce-order sequences of its unanswered
    batches, and ``queue``, its unsent ones), its numbering intact: the broker lost acknowledged
    records. librdkafka's ``rd_kafka_handle_idempotent_Produce_error`` (base seq == next acked) is
    fatal then; retrying the same sequence could only wait for delivery.timeout.ms."""
    if not isinstance(error, OutOfOrderSequenceError) or manager.waits_for_epoch(key):
        return False
    first = min(b.sequence for b in taken)
    return not any(s < first for s in in_flight) and not any(
        b.sequence < first and b.base_sequence is not None for b in queue)


def desynchronisation(manager: TransactionManager, key: Key, taken: list[ProducerBatch],
                      error: RiverlogError) -> RiverlogError:
    """The fatal error a desynchronised partition's batches are reported with."""
    head = min(taken, key=lambda b: b.sequence)
    return OutOfOrderSequenceError(
        f"ProduceRequest for {key[0]} [{key[1]}] with {sum(b.count for b in taken)} message(s) failed due to "
        f"sequence desynchronization with the broker (producer id {manager.producer_id}, epoch "
        f"{head.producer_epoch}, base seq {head.base_sequence}): {error.message}. The idempotent producer "
        "cannot guarantee order or no duplicates any more and fails: close it and create a new one"
    ).reported_as(retriable=False)
