"""A transactional producer's side of a transaction (confluent-kafka's API).

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
"""
from __future__ import annotations

import threading

from broker.client.coordinator import CoordinatorClient
from broker.errors import InvalidTxnStateError, RiverlogError
from broker.proto import riverlog_pb2 as pb

UNINITIALIZED, READY, IN_TRANSACTION, FATAL = "uninitialized", "ready", "in transaction", "fatal"


class TransactionManager:
    def __init__(self, producer, transactional_id: str):
        self.producer = producer
        self.transactional_id = transactional_id
        self.coordinator = CoordinatorClient(producer.cluster, transactional_id, key_type=1)
        self.state = UNINITIALIZED
        self.lock = threading.Lock()
        self.partitions: set[tuple[str, int]] = set()
        self.error: RiverlogError | None = None  # the first failed delivery of this transaction

    def _timeout(self, timeout: float | None) -> float:
        return self.producer.config["request.timeout.ms"] / 1000.0 if timeout is None or timeout < 0 else timeout

    def _require(self, *states: str) -> None:
        if self.state not in states:
            raise InvalidTxnStateError(f"transactional producer is {self.state}; this needs it to be "
                                       f"{' or '.join(states)}")

    @property
    def in_transaction(self) -> bool:
        return self.state == IN_TRANSACTION

    # ------------------------------------------------------------------------------ application
    def init(self, timeout: float | None) -> None:
        self._require(UNINITIALIZED, READY)
        sender = self.producer._sender
        reply = self.coordinator.call("InitProducerId", pb.InitProducerIdRequest(
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self.producer.config["transaction.timeout.ms"]), self._timeout(timeout))
        with self.producer._cond:
            sender.producer_id, sender.producer_epoch = reply.producer_id, reply.producer_epoch
            sender.next_sequence = {}
        self.state = READY

    def begin(self) -> None:
        self._require(READY)
        with self.lock:
            self.partitions, self.error = set(), None
        self.state = IN_TRANSACTION

    def send_offsets(self, offsets, group_metadata, timeout: float | None) -> None:
        self._require(IN_TRANSACTION)
        sender = self.producer._sender
        deadline = self._timeout(timeout)
        group_id = group_metadata.group_id
        self.coordinator.call("AddOffsetsToTxn", pb.AddOffsetsToTxnRequest(
            transactional_id=self.transactional_id, producer_id=sender.producer_id,
            producer_epoch=sender.producer_epoch, group_id=group_id), deadline)
        by_topic: dict[str, list] = {}
        for tp in offsets:
            if tp.offset >= 0:
                by_topic.setdefault(tp.topic, []).append(pb.CommitPartition(
                    partition=tp.partition, offset=tp.offset, metadata=tp.metadata or "", leader_epoch=-1))
        request = pb.TxnOffsetCommitRequest(
            transactional_id=self.transactional_id, group_id=group_id, producer_id=sender.producer_id,
            producer_epoch=sender.producer_epoch, member_id=group_metadata.member_id,
            member_epoch=group_metadata.member_epoch,
            topics=[pb.CommitTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
        response = CoordinatorClient(self.producer.cluster, group_id).call("TxnOffsetCommit", request, deadline)
        failed = next((r for r in response.results if r.error_code), None)
        if failed is not None:
            from broker.errors import error_for_code
            raise error_for_code(failed.error_code)(failed.error_message)

    def end(self, commit: bool, timeout: float | None) -> None:
        self._require(IN_TRANSACTION)
        left = self.producer.flush(self._timeout(timeout))
        if commit and (left or self.error is not None):
            raise self.error or InvalidTxnStateError(
                f"{left} record(s) of the transaction are not delivered yet; abort_transaction() or retry")
        sender = self.producer._sender
        self.coordinator.call("EndTxn", pb.EndTxnRequest(
            transactional_id=self.transactional_id, producer_id=sender.producer_id,
            producer_epoch=sender.producer_epoch, commit=commit), self._timeout(timeout))
        self.state = READY

    # ------------------------------------------------------------------------------ sender thread
    def add_partitions(self, keys) -> set:
        """Register partitions with the coordinator before their first batch; returns those added."""
        with self.lock:
            new = sorted(set(keys) - self.partitions)
        if not new:
            return set(keys)
        sender = self.producer._sender
        by_topic: dict[str, list[int]] = {}
        for topic, partition in new:
            by_topic.setdefault(topic, []).append(partition)
        self.coordinator.call("AddPartitionsToTxn", pb.AddPartitionsToTxnRequest(
            transactional_id=self.transactional_id, producer_id=sender.producer_id,
            producer_epoch=sender.producer_epoch,
            partitions=[pb.GroupPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()]),
            self._timeout(None))
        with self.lock:
            self.partitions.update(new)
        return set(keys)

    def failed(self, error: RiverlogError) -> None:
        with self.lock:
            if self.error is None:
                self.error = error
