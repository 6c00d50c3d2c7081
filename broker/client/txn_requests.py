"""A transactional producer's requests to its transaction coordinator (confluent-kafka's API).

    p = Producer({"bootstrap.servers": ..., "transactional.id": "billing-app-1"})
    p.init_transactions()                 # fences older instances with this transactional.id
    p.begin_transaction()
    p.produce("invoices", value=...)
    p.send_offsets_to_transaction(consumer.position(consumer.assignment()), consumer.consumer_group_metadata())
    p.commit_transaction()                # or abort_transaction()

The coordinator (leader of the transactional.id's ``__transaction_state`` partition) learns each
partition before the first batch goes there (AddPartitionsToTxn, sent by the producer's sender
thread), and each group whose offsets ride along (AddOffsetsToTxn, then TxnOffsetCommit to the
group's coordinator). Committing first flushes every record: a transaction whose records did not
all arrive cannot commit (``abort_transaction`` then).

This module is the I/O; the state, the producer id and epoch and the rules live in the pure
:class:`~broker.client.transactions.TransactionManager`, which every call here consults and moves.
"""
from __future__ import annotations

from collections.abc import Callable

from broker.client.coordinator import CoordinatorClient
from broker.client.transactions import FENCING, TransactionManager, TxnState
from broker.errors import InvalidTxnStateError, error_for_code
from broker.protocol import CoordinatorType
from broker.proto import riverlog_pb2 as pb

S = TxnState


class TransactionRequests:
    """``flush(timeout) -> records left`` is the producer's: ending a transaction flushes it first."""

    def __init__(self, manager: TransactionManager, cluster, config, flush: Callable[[float], int]):
        self.manager = manager
        self.transactional_id = manager.transactional_id
        self.cluster = cluster
        self.config = config
        self.flush = flush
        self.coordinator = CoordinatorClient(cluster, manager.transactional_id, key_type=CoordinatorType.TRANSACTION)

    def _timeout(self, timeout: float | None) -> float:
        return self.config["request.timeout.ms"] / 1000.0 if timeout is None or timeout < 0 else timeout

    def _call(self, method: str, request, timeout: float):
        """A call to the transaction coordinator; being fenced makes the producer fatal."""
        try:
            return self.coordinator.call(method, request, timeout)
        except FENCING as e:
            raise self.manager.fenced(e) from None

    def _ids(self) -> dict:
        m = self.manager
        return {"transactional_id": self.transactional_id, "producer_id": m.producer_id,
                "producer_epoch": m.producer_epoch}

    # ------------------------------------------------------------------------------ application
    def init(self, timeout: float | None) -> None:
        self.manager.require(S.UNINITIALIZED, S.READY)
        reply = self._call("InitProducerId", pb.InitProducerIdRequest(
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self.config["transaction.timeout.ms"]), self._timeout(timeout))
        self.manager.new_epoch(reply.producer_id, reply.producer_epoch)
        self.manager.move(S.READY)

    def _bump_epoch(self, timeout: float) -> None:
        """KIP-360: the coordinator gives this producer its next epoch, if it is still the current one."""
        reply = self._call("InitProducerId", pb.InitProducerIdRequest(
            transaction_timeout_ms=self.config["transaction.timeout.ms"], **self._ids()), timeout)
        self.manager.new_epoch(reply.producer_id, reply.producer_epoch)

    def begin(self) -> None:
        self.manager.begin()

    def send_offsets(self, offsets, group_metadata, timeout: float | None) -> None:
        self.manager.require(S.IN_TRANSACTION)
        deadline = self._timeout(timeout)
        group_id = group_metadata.group_id
        self._call("AddOffsetsToTxn", pb.AddOffsetsToTxnRequest(group_id=group_id, **self._ids()), deadline)
        by_topic: dict[str, list] = {}
        for tp in offsets:
            if tp.offset >= 0:
                by_topic.setdefault(tp.topic, []).append(pb.CommitPartition(
                    partition=tp.partition, offset=tp.offset, metadata=tp.metadata or "", leader_epoch=-1))
        request = pb.TxnOffsetCommitRequest(
            group_id=group_id, member_id=group_metadata.member_id, member_epoch=group_metadata.member_epoch,
            topics=[pb.CommitTopic(name=t, partitions=ps) for t, ps in by_topic.items()], **self._ids())
        response = CoordinatorClient(self.cluster, group_id).call("TxnOffsetCommit", request, deadline)
        failed = next((r for r in response.results if r.error_code), None)
        if failed is not None:
            error = error_for_code(failed.error_code)(failed.error_message)
            raise self.manager.fenced(error) if isinstance(error, FENCING) else error

    def end(self, commit: bool, timeout: float | None) -> None:
        m = self.manager
        m.require(S.IN_TRANSACTION, S.ABORTABLE_ERROR)
        # Records of a healthy transaction are sent even when it aborts (read_uncommitted readers see
        # them); once a record failed, the rest fail unsent (the manager's doomed()).
        left = self.flush(self._timeout(timeout))
        m.require(S.IN_TRANSACTION, S.ABORTABLE_ERROR)  # fenced while flushing: fatal
        if commit and (left or m.error is not None):
            raise m.error or InvalidTxnStateError(
                f"{left} record(s) of the transaction are not delivered yet; abort_transaction() or retry")
        before = m.state
        m.move(S.COMMITTING if commit else S.ABORTING)
        try:
            self._call("EndTxn", pb.EndTxnRequest(commit=commit, **self._ids()), self._timeout(timeout))
            if m.epoch_bump_needed:
                self._bump_epoch(self._timeout(timeout))
        except BaseException:
            if m.state is not S.FATAL_ERROR:
                m.move(before)  # unanswered: the application may end it again
            raise
        m.move(S.READY)

    # ------------------------------------------------------------------------------ sender thread
    def add_partitions(self, keys) -> set:
        """Register partitions with the coordinator before their first batch; returns those added."""
        m = self.manager
        with m.lock:
            new = sorted(set(keys) - m.partitions)
        if not new:
            return set(keys)
        by_topic: dict[str, list[int]] = {}
        for topic, partition in new:
            by_topic.setdefault(topic, []).append(partition)
        self._call("AddPartitionsToTxn", pb.AddPartitionsToTxnRequest(
            partitions=[pb.GroupPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()], **self._ids()),
            self._timeout(None))
        with m.lock:
            m.partitions.update(new)
        return set(keys)
