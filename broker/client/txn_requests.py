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

import time
from collections.abc import Callable

from broker.client.coordinator import CoordinatorClient
from broker.client.transactions import FENCING, TransactionManager, TxnState
from broker.errors import (ConcurrentTransactionsError, ConflictError, CoordinatorLoadInProgressError,
                           InvalidProducerIdMappingError, InvalidTxnStateError, InvalidTxnTimeoutError, KafkaError,
                           KafkaException, KafkaTimeoutError, RiverlogError, TransactionalIdNotFoundError,
                           UnknownTopicOrPartitionError, error_for_code)
from broker.protocol import CoordinatorType
from broker.proto import riverlog_pb2 as pb

S = TxnState
# The coordinator no longer knows this producer for its transactional.id (it expired after
# transactional.id.expiration.ms): Kafka's INVALID_PRODUCER_ID_MAPPING, abortable in Kafka's and
# librdkafka's clients; aborting re-initialises. TRANSACTIONAL_ID_NOT_FOUND is treated alike.
FORGOTTEN = (TransactionalIdNotFoundError, InvalidProducerIdMappingError)
# Answers to AddPartitionsToTxn/AddOffsetsToTxn given before the coordinator changes anything.
REFUSED = (UnknownTopicOrPartitionError, ConcurrentTransactionsError, CoordinatorLoadInProgressError)
TXN_OFFSET_COMMIT_RETRY_S = 0.5  # librdkafka's delay before sending a refused TxnOffsetCommit again


class TransactionRequests:
    """``flush(timeout) -> records left`` and ``purge()`` are the producer's: committing flushes
    first, aborting purges what was not delivered."""

    def __init__(self, manager: TransactionManager, cluster, config, flush: Callable[[float], int],
                 purge: Callable[[], None] = lambda: None):
        self.manager = manager
        self.transactional_id = manager.transactional_id
        self.cluster = cluster
        self.config = config
        self.flush = flush
        self.purge = purge
        self.coordinator = CoordinatorClient(cluster, manager.transactional_id, key_type=CoordinatorType.TRANSACTION)
        self._opening_calls = 0   # AddPartitionsToTxn/AddOffsetsToTxn under way (see _opening)
        self._opened = False      # one of them of this transaction was not refused

    def _timeout(self, timeout: float | None) -> float:
        return self.config["request.timeout.ms"] / 1000.0 if timeout is None or timeout < 0 else timeout

    def _call(self, method: str, request, timeout: float):
        """A call to the transaction coordinator; being fenced makes the producer fatal."""
        try:
            return self.coordinator.call(method, request, timeout)
        except FENCING as e:
            raise self.manager.fenced(e) from None

    def _opening(self, method: str, request, timeout: float) -> None:
        """A request that opens the transaction at the coordinator (Kafka's ``transactionStarted``).
        The transaction counts as started from the call on, since an unanswered one may have opened
        it; a refusal the coordinator answers before changing anything does not count, so an abort of
        a transaction it never opened sends no EndTxn (answered ``INVALID_TXN_STATE``: fatal). The
        sender thread's AddPartitionsToTxn and the application's AddOffsetsToTxn may overlap: the
        transaction stops counting as started only when no call of it opened it or is under way."""
        m = self.manager
        with m.lock:
            m.started = True
            self._opening_calls += 1
        opened = True
        try:
            self._call(method, request, timeout)
        except REFUSED:
            opened = False
            raise
        finally:
            with m.lock:
                self._opening_calls -= 1
                self._opened |= opened
                if not self._opened and not self._opening_calls:
                    m.started = False

    def _ids(self) -> dict:
        m = self.manager
        return {"transactional_id": self.transactional_id, "producer_id": m.producer_id,
                "producer_epoch": m.producer_epoch}

    # ------------------------------------------------------------------------------ application
    def init(self, timeout: float | None) -> None:
        """Once per producer, as librdkafka's: after it succeeded, calling it again is ``_STATE``. One
        that failed retriably (timed out) must be called again before any other call (``_CONFLICT``)."""
        m = self.manager
        m.require(S.UNINITIALIZED)
        m.unfinished = "init_transactions"
        try:
            reply = self._call("InitProducerId", pb.InitProducerIdRequest(
                transactional_id=self.transactional_id,
                transaction_timeout_ms=self.config["transaction.timeout.ms"]), self._timeout(timeout))
        except InvalidTxnTimeoutError as e:  # the configuration can never work: fatal, as Kafka's clients
            m.unfinished = None
            raise m.fatal(e) from None
        except BaseException as e:
            if not (isinstance(e, RiverlogError) and e.retriable):
                m.unfinished = None
            raise
        m.new_epoch(reply.producer_id, reply.producer_epoch)
        m.unfinished = None
        m.move(S.READY)

    def _bump_epoch(self, timeout: float) -> None:
        """KIP-360: the coordinator gives this producer its next epoch, if it is still the current one."""
        reply = self._call("InitProducerId", pb.InitProducerIdRequest(
            transaction_timeout_ms=self.config["transaction.timeout.ms"], **self._ids()), timeout)
        self.manager.new_epoch(reply.producer_id, reply.producer_epoch)

    def _no_conflict(self, api: str) -> None:
        """Refuse ``api`` while another transactional call is unfinished (librdkafka's
        ``rd_kafka_txn_curr_api_begin``): that call must be made again first."""
        m = self.manager
        if m.unfinished not in (None, api) and m.state is not S.FATAL_ERROR:
            raise ConflictError(f"Conflicting {m.unfinished} API call is already in progress: call "
                                f"{m.unfinished}() again to finish it")

    def begin(self) -> None:
        self._no_conflict("begin_transaction")
        with self.manager.lock:
            self.manager.begin()
            self._opened = False

    def send_offsets(self, offsets, group_metadata, timeout: float | None) -> None:
        """AddOffsetsToTxn, then TxnOffsetCommit to the group's coordinator, as librdkafka's
        ``rd_kafka_send_offsets_to_transaction``: no offsets or no group metadata is ``_INVALID_ARG``;
        no valid offset (all < 0: nothing was consumed) sends nothing. A transient refusal of the
        offsets (``retriable()``) is sent again every 500 ms until ``timeout``, then makes the
        transaction abortable, so it cannot commit with only some of its offsets. A refusal that is
        neither fencing nor transient (``IllegalGeneration`` after a rebalance, ``UnknownMemberId``,
        the transactional.id forgotten...) makes it abortable at once, as Kafka's
        ``TxnOffsetCommitHandler`` and librdkafka do: committing it without its offsets would let
        the records be processed again (duplicates); ``INVALID_TXN_STATE`` (the offsets are not part
        of the producer's ongoing transaction) is fatal, as in librdkafka. A transient failure of
        AddOffsetsToTxn leaves the transaction as it was: the call may be repeated."""
        if offsets is None or group_metadata is None:
            raise KafkaException(KafkaError(KafkaError._INVALID_ARG, "cgmetadata and offsets are required parameters"))
        self._no_conflict("send_offsets_to_transaction")
        self.manager.require(S.IN_TRANSACTION)
        valid = [tp for tp in offsets if tp.offset >= 0]
        if not valid:
            return
        try:
            self._send_offsets(valid, group_metadata, self._timeout(timeout))
        except RiverlogError as e:
            m = self.manager
            if m.state is S.FATAL_ERROR:
                raise m.fatal_error from None
            if e.retriable:
                raise
            raise m.abortable(e) from None

    def _send_offsets(self, offsets, group_metadata, timeout: float) -> None:
        group_id = group_metadata.group_id
        deadline = time.monotonic() + timeout
        self._opening("AddOffsetsToTxn", pb.AddOffsetsToTxnRequest(group_id=group_id, **self._ids()), timeout)
        by_topic: dict[str, list] = {}
        for tp in offsets:
            by_topic.setdefault(tp.topic, []).append(pb.CommitPartition(
                partition=tp.partition, offset=tp.offset, metadata=tp.metadata or "",
                leader_epoch=-1 if tp.leader_epoch is None else tp.leader_epoch))   # as librdkafka sends it
        request = pb.TxnOffsetCommitRequest(
            group_id=group_id, member_id=group_metadata.member_id, member_epoch=group_metadata.member_epoch,
            topics=[pb.CommitTopic(name=t, partitions=ps) for t, ps in by_topic.items()], **self._ids())
        coordinator = CoordinatorClient(self.cluster, group_id)
        while True:
            try:
                response = coordinator.call("TxnOffsetCommit", request, max(0.1, deadline - time.monotonic()))
                failed = next((r for r in response.results if r.error_code), None)
                if failed is None:
                    return
                error = error_for_code(failed.error_code)(failed.error_message)
            except RiverlogError as e:
                error = e
            if isinstance(error, FENCING):
                raise self.manager.fenced(error)
            if isinstance(error, InvalidTxnStateError):
                raise self.manager.fatal(error)
            if not error.retriable:
                raise error
            if time.monotonic() + TXN_OFFSET_COMMIT_RETRY_S >= deadline:
                raise self.manager.abortable(error)  # librdkafka: the timeout ran out, the offsets are partial
            time.sleep(TXN_OFFSET_COMMIT_RETRY_S)

    def end(self, commit: bool, timeout: float | None) -> None:
        """Commit: flush, then EndTxn; an abortable transaction raises its error
        (``txn_requires_abort()``); a flush that times out is retriable and resumable (call commit
        again), as librdkafka's. Abort: queued records are purged (their reports say
        ``_PURGE_QUEUE``, as confluent-kafka's), those in flight waited for, then EndTxn. A
        transaction that registered nothing with the coordinator needs no EndTxn. If the coordinator
        forgot this producer (transactional.id expired), the abort asks for a new producer id
        instead of sending EndTxn, as Kafka's Java client does, and the producer carries on."""
        m = self.manager
        api = "commit_transaction" if commit else "abort_transaction"
        self._no_conflict(api)
        if commit:
            # librdkafka's BEGIN_COMMIT: no more records, and until this call completes or fails for
            # good, the other calls are _CONFLICT (the flush goes on in the background).
            try:
                m.require(S.IN_TRANSACTION)  # a resumed commit whose record failed meanwhile: abortable
                m.unfinished = api
                left = self.flush(self._timeout(timeout))
                m.require(S.IN_TRANSACTION)  # fenced, or a record failed, while flushing
            except BaseException as e:
                if not (isinstance(e, RiverlogError) and e.retriable):
                    m.unfinished = None
                raise
            if left:  # retriable and resumable, as librdkafka's: call commit_transaction() again
                raise KafkaTimeoutError(f"Failed to flush all outstanding messages within the API timeout: "
                                        f"{left} message(s) remaining; call commit_transaction() again")
        else:
            m.require(S.IN_TRANSACTION, S.ABORTABLE_ERROR)
            # Queued records fail (_PURGE_QUEUE); those in flight are waited for, so that none is
            # appended after the abort marker (it would open a transaction nobody ends).
            self.purge()
            self.flush(self._timeout(timeout))
            m.require(S.IN_TRANSACTION, S.ABORTABLE_ERROR)  # fenced meanwhile: fatal
        before = m.state
        ending = S.COMMITTING if commit else S.ABORTING
        m.move(ending)
        try:
            if not commit and isinstance(m.error, FORGOTTEN):
                self._bump_epoch(self._timeout(timeout))  # a new producer id: nothing to abort there
            elif m.started:
                m.unfinished = api   # from here the coordinator may decide, whatever we hear back
                self._end_txn(commit, timeout)
            # else nothing reached the coordinator: the transaction ends here (as Kafka's clients)
        except BaseException as e:
            if m.state is ending:
                m.move(before)  # unanswered: the application may end it again
            if not (isinstance(e, RiverlogError) and e.retriable):
                m.unfinished = None  # refused outright (or fatal): nothing was decided
            raise
        m.unfinished = None
        m.move(S.READY)

    def _end_txn(self, commit: bool, timeout: float | None) -> None:
        m = self.manager
        try:
            self._call("EndTxn", pb.EndTxnRequest(commit=commit, **self._ids()), self._timeout(timeout))
        except FORGOTTEN as e:
            if commit:  # nothing of it can commit: abort (which re-initialises)
                m.move(S.IN_TRANSACTION)
                raise m.abortable(e) from None
            self._bump_epoch(self._timeout(timeout))
            return
        except InvalidTxnStateError as e:  # the coordinator's transaction is not this producer's: fatal,
            raise m.fatal(e) from None     # as in librdkafka's and Kafka's EndTxn handlers
        if m.epoch_bump_needed:
            self._bump_epoch(self._timeout(timeout))

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
        self._opening("AddPartitionsToTxn", pb.AddPartitionsToTxnRequest(
            partitions=[pb.GroupPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()], **self._ids()),
            self._timeout(None))
        with m.lock:
            m.partitions.update(new)
        return set(keys)
