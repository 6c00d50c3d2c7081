"""Which open transactions hang: Kafka's ``kafka-transactions find-hanging``, as a pure function of
what the admin client reports (``FindHangingTransactionsCommand``).

    found = candidates(producers, now_ms, max_timeout_ms)
    rows = hanging_rows(found, transactional_ids, descriptions, now_ms)
    # [["orders", "0", "4001", "0", "-1", "17", "1764540000000", "20"]]

A candidate is a producer a partition remembers with an open transaction (a start offset) whose
last write is older than ``--max-transaction-timeout``: no live transaction can be that old, since
its coordinator aborts it once ``transaction.timeout.ms`` passes. It hangs when no coordinator
knows its producer id, or when the transaction its coordinator knows does not hold that partition
(so no marker will ever be written there). Rows carry Kafka's ``find-hanging`` columns.

``open_at`` is how ``kafka-transactions abort --start-offset`` names a transaction: the producer
whose open transaction on the partition starts at that offset. ``coordinator_holds`` decides how
``abort`` ends it: through its coordinator when one holds it on that partition (its markers then
reach every partition of the transaction, which stays atomic), else with an abort marker written
at the partition itself (``AdminClient.abort_transaction(AbortTransactionSpec)``).
"""
from __future__ import annotations

__all__ = ["HEADERS", "candidates", "coordinator_holds", "hanging_rows", "open_at", "spec_text"]

HEADERS = ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
           "LastTimestamp", "Duration(min)"]


def candidates(producers: dict, now_ms: int, max_timeout_ms: int) -> list[tuple[str, int, object]]:
    """(topic, partition, active producer) of each open transaction older than the timeout;
    ``producers`` maps (topic, partition) to the partition's described producers."""
    return [(topic, partition, a) for (topic, partition), described in sorted(producers.items())
            for a in described.active_producers
            if a.current_txn_start_offset >= 0 and now_ms - a.last_timestamp > max_timeout_ms]


def hanging_rows(found: list, transactional_ids: dict[int, str], descriptions: dict, now_ms: int) -> list[list[str]]:
    """The rows of the candidates ``found`` that hang, given each producer id's transactional.id
    (from ``list_transactions``) and each transactional.id's description (None: the coordinator
    does not know it)."""
    rows = []
    for topic, partition, a in found:
        txn_id = transactional_ids.get(a.producer_id)
        description = descriptions.get(txn_id) if txn_id is not None else None
        if description is not None and (topic, partition) in {(tp.topic, tp.partition)
                                                               for tp in description.topic_partitions}:
            continue
        rows.append([topic, str(partition), str(a.producer_id), str(a.producer_epoch), "-1",
                     str(a.current_txn_start_offset), str(a.last_timestamp),
                     str((now_ms - a.last_timestamp) // 60_000)])
    return rows


def open_at(described, start_offset: int):
    """The active producer whose open transaction on the described partition starts at
    ``start_offset`` (Kafka's ``AbortTransactionCommand.buildAbortSpec``), or None."""
    return next((a for a in described.active_producers
                 if a.current_txn_start_offset >= 0 and a.current_txn_start_offset == start_offset), None)


def coordinator_holds(description, producer_id: int, topic: str, partition: int) -> bool:
    """Whether a coordinator's transaction (its ``describe_transactions`` description, None when
    no coordinator knows the transactional.id) is ``producer_id``'s and holds that partition: then
    that coordinator will write its marker there, and an abort must go through it."""
    return (description is not None and description.producer_id == producer_id
            and (topic, partition) in {(tp.topic, tp.partition) for tp in description.topic_partitions})


def spec_text(topic: str, partition: int, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> str:
    """How Kafka's ``AbortTransactionSpec`` prints itself, for the command's error message."""
    return (f"AbortTransactionSpec(topicPartition={topic}-{partition}, producerId={producer_id}, "
            f"producerEpoch={producer_epoch}, coordinatorEpoch={coordinator_epoch})")
