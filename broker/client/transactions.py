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

Errors come in two kinds, as in Kafka:

- **abortable**: a record of the transaction failed (timed out, refused). The transaction can only
  be aborted; queued records of it fail at once. If a failed batch had been sent, its partition's
  sequence numbers have a gap, so after the abort the producer asks the coordinator for its next
  epoch with its current producer id and epoch (KIP-360). The producer never picks an epoch itself.
- **fatal**: the producer was fenced (``ProducerFenced``, or a partition's ``InvalidProducerEpoch``:
  a newer instance with this transactional.id called ``init_transactions``, or the coordinator
  aborted the transaction and bumped the epoch). Every later call raises the same
  :class:`ProducerFencedError`; the producer can only be closed. Only its successor may write.

States: ``uninitialized`` → ``ready`` ⇄ ``in transaction``; any → ``fatal`` (final).
"""
from __future__ import annotations

import threading

from broker.client.coordinator import CoordinatorClient
from broker.errors import (InvalidProducerEpochError, InvalidTxnStateError, ProducerFencedError, RiverlogError,
                           error_for_code)
from broker.proto import riverlog_pb2 as pb

UNINITIALIZED, READY, IN_TRANSACTION, FATAL = "uninitialized", "ready", "in transaction", "fatal"
_TRANSITIONS = {UNINITIALIZED: {READY, FATAL}, READY: {READY, IN_TRANSACTION, FATAL},
                IN_TRANSACTION: {READY, FATAL}, FATAL: set()}
# Errors that mean another instance (or the coordinator) took this producer's epoch over.
_FENCING = (ProducerFencedError, InvalidProducerEpochError)


class TransactionManager:
    def __init__(self, producer, transactional_id: str):
        self.producer = producer
        self.transactional_id = transactional_id
        self.coordinator = CoordinatorClient(producer.cluster, transactional_id, key_type=1)
        self.state = UNINITIALIZED
        self.lock = threading.Lock()
        self.partitions: set[tuple[str, int]] = set()
        self.error: RiverlogError | None = None  # the first failed delivery of this transaction
        self.fatal_error: ProducerFencedError | None = None
        self.epoch_bump_needed = False  # a sent batch was given up: new epoch after the abort

    def _move(self, state: str) -> None:
        with self.lock:
            if self.state == FATAL:
                raise self.fatal_error
            assert state in _TRANSITIONS[self.state], f"{self.state} -> {state}"
            self.state = state

    def _timeout(self, timeout: float | None) -> float:
        return self.producer.config["request.timeout.ms"] / 1000.0 if timeout is None or timeout < 0 else timeout

    def _require(self, *states: str) -> None:
        if self.state == FATAL:
            raise self.fatal_error
        if self.state not in states:
            raise InvalidTxnStateError(f"transactional producer is {self.state}; this needs it to be "
                                       f"{' or '.join(states)}")

    @property
    def in_transaction(self) -> bool:
        return self.state == IN_TRANSACTION

    def check_can_produce(self) -> None:
        if self.state == FATAL:
            raise self.fatal_error
        if self.state != IN_TRANSACTION:
            raise InvalidTxnStateError("a transactional producer produces only inside begin_transaction()")

    def doomed(self) -> RiverlogError | None:
        """Why records queued for the transaction must fail rather than be sent (sender thread)."""
        if self.state == FATAL:
            return self.fatal_error
        return self.error if self.state == IN_TRANSACTION else None

    def _call(self, method: str, request, timeout: float):
        """A call to the transaction coordinator; being fenced makes the producer fatal."""
        try:
            return self.coordinator.call(method, request, timeout)
        except _FENCING as e:
            raise self.fenced(e) from None

    def fenced(self, cause: RiverlogError) -> ProducerFencedError:
        """Enter the final state: this producer's epoch belongs to another instance now."""
        with self.lock:
            if self.fatal_error is None:
                sender = self.producer._sender
                self.fatal_error = ProducerFencedError(
                    f"transactional.id '{self.transactional_id}': this producer (producer id {sender.producer_id}, "
                    f"epoch {sender.producer_epoch}) is fenced: a newer instance with the same transactional.id "
                    "called init_transactions(), or the coordinator aborted its transaction "
                    f"(transaction.timeout.ms, or an operator). It can only be closed: close() it and let the "
                    f"newer instance carry on (or create a new Producer and call init_transactions()). "
                    f"Cause: {cause.message if isinstance(cause, RiverlogError) else cause}")
            self.state = FATAL
            return self.fatal_error

    # ------------------------------------------------------------------------------ application
    def init(self, timeout: float | None) -> None:
        self._require(UNINITIALIZED, READY)
        reply = self._call("InitProducerId", pb.InitProducerIdRequest(
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self.producer.config["transaction.timeout.ms"]), self._timeout(timeout))
        self.producer._sender.new_epoch(reply.producer_id, reply.producer_epoch)
        with self.lock:
            self.epoch_bump_needed = False
        self._move(READY)

    def _bump_epoch(self, timeout: float) -> None:
        """KIP-360: the coordinator gives this producer its next epoch, if it is still the current one."""
        sender = self.producer._sender
        reply = self._call("InitProducerId", pb.InitProducerIdRequest(
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self.producer.config["transaction.timeout.ms"],
            producer_id=sender.producer_id, producer_epoch=sender.producer_epoch), timeout)
        sender.new_epoch(reply.producer_id, reply.producer_epoch)
        with self.lock:
            self.epoch_bump_needed = False

    def begin(self) -> None:
        self._require(READY)
        with self.lock:
            self.partitions, self.error = set(), None
        self._move(IN_TRANSACTION)

    def send_offsets(self, offsets, group_metadata, timeout: float | None) -> None:
        self._require(IN_TRANSACTION)
        sender = self.producer._sender
        deadline = self._timeout(timeout)
        group_id = group_metadata.group_id
        self._call("AddOffsetsToTxn", pb.AddOffsetsToTxnRequest(
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
            error = error_for_code(failed.error_code)(failed.error_message)
            raise self.fenced(error) if isinstance(error, _FENCING) else error

    def end(self, commit: bool, timeout: float | None) -> None:
        self._require(IN_TRANSACTION)
        # Records of a healthy transaction are sent even when it aborts (read_uncommitted readers see
        # them); once a record failed, the rest fail unsent (the sender's doomed()).
        left = self.producer.flush(self._timeout(timeout))
        self._require(IN_TRANSACTION)  # fenced while flushing: fatal
        if commit and (left or self.error is not None):
            raise self.error or InvalidTxnStateError(
                f"{left} record(s) of the transaction are not delivered yet; abort_transaction() or retry")
        sender = self.producer._sender
        self._call("EndTxn", pb.EndTxnRequest(
            transactional_id=self.transactional_id, producer_id=sender.producer_id,
            producer_epoch=sender.producer_epoch, commit=commit), self._timeout(timeout))
        if self.epoch_bump_needed:
            self._bump_epoch(self._timeout(timeout))
        self._move(READY)

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
        self._call("AddPartitionsToTxn", pb.AddPartitionsToTxnRequest(
            transactional_id=self.transactional_id, producer_id=sender.producer_id,
            producer_epoch=sender.producer_epoch,
            partitions=[pb.GroupPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()]),
            self._timeout(None))
        with self.lock:
            self.partitions.update(new)
        return set(keys)

    def failed(self, error: RiverlogError) -> None:
        """A record of the transaction was not delivered (sender thread): abortable, or fatal."""
        if isinstance(error, _FENCING):
            self.fenced(error)
            return
        with self.lock:
            if self.error is None:
                self.error = error

    def gave_up_sent_batch(self) -> None:
        """A batch that was sent will never be written: the next epoch is needed after the abort."""
        with self.lock:
            self.epoch_bump_needed = True
