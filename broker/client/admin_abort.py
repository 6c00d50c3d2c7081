"""Aborting a hanging transaction at its partition: Kafka's ``Admin.abortTransaction(AbortTransactionSpec)``,
mixed into :class:`~broker.client.admin.AdminClient` ahead of the abort by transactional.id.

    spec = AbortTransactionSpec(TopicPartition("invoices", 0), producer_id=4, producer_epoch=0)
    admin.abort_transaction(spec).result()          # None: the abort marker is written
    admin.abort_transaction("billing-app-1").result()   # by transactional.id, through its coordinator

A transaction that no coordinator holds (its producer id unknown to every coordinator, or its
coordinator's transaction lacks the partition) will never get a marker from one; the spec's
``WriteTxnMarkers`` (ABORT) goes straight to the partition's leader, which checks it as a
coordinator's marker (an older producer epoch than the partition's is ``InvalidProducerEpochError``,
an older coordinator epoch ``TransactionCoordinatorFencedError``). Only the spec's partition is
marked: aborting a transaction a coordinator still holds this way breaks its atomicity (its other
partitions may commit), so end those through the coordinator (``abort_transactions``).
"""
from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass

from broker.client.message import TopicPartition
from broker.proto import riverlog_pb2 as pb
from broker.proto.partitions import grouped


@dataclass(frozen=True)
class AbortTransactionSpec:
    """Kafka's ``AbortTransactionSpec``: the partition, producer id and epoch of the open transaction,
    and the coordinator epoch its marker carries; a negative one (the default) takes the producer's
    last one the partition knows, 0 if none (partitions do not report it)."""
    topic_partition: TopicPartition
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int = -1


class AbortTransactionAdmin:
    """Needs ``self._fan_out`` and ``self._at_leader`` (from AdminFanOut); the abort by
    transactional.id is the next class's (TransactionAdmin)."""

    def abort_transaction(self, transaction, request_timeout: float | None = None) -> Future:
        """With an :class:`AbortTransactionSpec`: write its abort marker at the partition's leader
        (retried while leadership moves); a future of None. With a transactional.id: abort whatever
        it has open through its coordinator, fencing its producer (a future of
        ``(producer_id, producer_epoch)``)."""
        if not isinstance(transaction, AbortTransactionSpec):
            return super().abort_transaction(transaction, request_timeout)
        spec = transaction
        tp = spec.topic_partition
        if not isinstance(tp, TopicPartition):
            raise TypeError("AbortTransactionSpec.topic_partition must be a TopicPartition")
        timeout_ms = int((request_timeout or self.cluster.timeout) * 800)   # the leader answers before the call ends
        request = pb.WriteTxnMarkersRequest(producer_id=spec.producer_id, producer_epoch=spec.producer_epoch,
                                            commit=False, coordinator_epoch=spec.coordinator_epoch,
                                            timeout_ms=timeout_ms, partitions=grouped([tp]))

        def call():
            return [(tp, self._at_leader(tp, "WriteTxnMarkers", request, request_timeout,
                                         lambda response: response.partitions[0], lambda r: None))]
        return self._fan_out([tp], call, lambda results: results)[tp]


__all__ = ["AbortTransactionAdmin", "AbortTransactionSpec"]
