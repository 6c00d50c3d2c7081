"""Transaction administration, mixed into :class:`AdminClient` (Kafka's Admin API, confluent-style futures).

    admin.list_transactions().result()                                   # [TransactionListing]
    admin.describe_transactions(["billing-app-1"])["billing-app-1"].result()   # TransactionDescription
    admin.abort_transaction("billing-app-1").result()                    # (producer_id, new producer_epoch)
    admin.describe_producers([TopicPartition("invoices", 0)])[tp].result()   # PartitionProducers
    admin.commit_transactions([handle])[handle.transactional_id].result()    # None: committed
    admin.abort_transactions([handle])[handle.transactional_id].result()     # None: aborted

A :class:`TransactionHandle` (``Producer.transaction_handle()``) names one open transaction: its
transactional.id, producer id and epoch. ``commit_transactions`` and ``abort_transactions`` end
transactions by their handles from any process, after the producers that opened them are gone:
they send the EndTxn that each producer's own ``commit_transaction()``/``abort_transaction()``
would have sent. This is how one process commits what many wrote (:mod:`broker.client.exactly_once`).

A transactional.id's requests go to its transaction coordinator (the leader of its
``__transaction_state`` partition); ``describe_producers`` asks each partition's leader.
``abort_transaction`` is for a transaction whose producer is gone (a "hanging" transaction that
holds a partition's last stable offset back, so ``read_committed`` consumers stall): the coordinator
aborts it and bumps the producer epoch, so the producer that opened it is fenced
(``ProducerFencedError`` on its next commit or abort).
"""
from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from broker.client.admin_fan_out import _left
from broker.client.coordinator import CoordinatorClient
from broker.client.message import TopicPartition
from broker.errors import (CoordinatorLoadInProgressError, CoordinatorNotAvailableError, RiverlogError,
                           error_for_code)
from broker.protocol import CoordinatorType
from broker.proto import riverlog_pb2 as pb
from broker.proto.partitions import grouped



@dataclass(frozen=True)
class TransactionHandle:
    """One open transaction, enough to end it without its producer: what
    ``Producer.transaction_handle()`` hands out and ``AdminClient.commit_transactions`` takes.

        handle = producer.transaction_handle()      # after produce() and flush(), before commit
        admin.commit_transactions([handle])[handle.transactional_id].result()

    Small, immutable and picklable, so it can travel from the process that wrote to the one that
    decides (a Spark executor to its driver)."""
    transactional_id: str
    producer_id: int
    producer_epoch: int


@dataclass
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    coordinator: int = -1


@dataclass
class TransactionDescription:
    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_ms: int                       # -1 while no transaction is open
    topic_partitions: list[TopicPartition] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    coordinator: int = -1


@dataclass
class OpenTransaction:
    producer_id: int
    producer_epoch: int
    first_offset: int
    start_ms: int


@dataclass
class ActiveProducer:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int                 # ms of its last write; forgotten after producer.id.expiration.ms
    current_txn_start_offset: int       # -1: no open transaction


@dataclass
class PartitionProducers:
    last_stable_offset: int
    high_watermark: int
    open_transactions: list[OpenTransaction] = field(default_factory=list)  # oldest first
    active_producers: list[ActiveProducer] = field(default_factory=list)   # every one remembered, by id


#: Where coordinators keep transactions (the broker's ``broker.transaction.coordinator.TXN_TOPIC``).
TXN_STATE_TOPIC = "__transaction_state"


def _error(code: int, message: str) -> RiverlogError:
    return error_for_code(code)(message)


def _leaders(metadata: pb.MetadataResponse) -> dict[int, tuple[int, int]]:
    """(leader, leader epoch) per ``__transaction_state`` partition."""
    return {p.partition: (p.leader, p.leader_epoch) for tm in metadata.topics
            if tm.name == TXN_STATE_TOPIC and not tm.error_code for p in tm.partitions}


def _incomplete(why: str) -> CoordinatorNotAvailableError:
    """The listing misses a coordinator's transactions: fail it rather than report them absent
    (a transaction missing from it would look hanging to ``kafka-transactions``' commands)."""
    return CoordinatorNotAvailableError(
        f"the transaction listing is incomplete: {why}; list again once every broker is up and every "
        f"{TXN_STATE_TOPIC} partition has a leader")


class TransactionAdmin:
    """Needs ``self.cluster`` and ``self._fan_out`` (from AdminClient)."""

    #: Whether :meth:`list_transactions` asks a coordinator still loading its state again.
    retry_loading_listings = True

    def _txn_coordinator(self, transactional_id: str) -> CoordinatorClient:
        return CoordinatorClient(self.cluster, transactional_id, key_type=CoordinatorType.TRANSACTION)

    def _describe_one(self, transactional_id: str, timeout: float | None) -> TransactionDescription:
        response = self._txn_coordinator(transactional_id).call(
            "DescribeTransactions", pb.DescribeTransactionsRequest(transactional_ids=[transactional_id]), timeout)
        d = response.transactions[0]
        if d.error_code:
            raise _error(d.error_code, d.error_message)
        return TransactionDescription(
            d.transactional_id, d.state, d.producer_id, d.producer_epoch, d.timeout_ms, d.start_ms,
            [TopicPartition(g.topic, p) for g in d.partitions for p in g.partitions], list(d.groups), d.coordinator)

    # ------------------------------------------------------------------------------ the API
    def list_transactions(self, request_timeout: float | None = None, states: list[str] | None = None,
                          prefix: str = "", *, retry_loading: bool | None = None) -> Future:
        """A future of [TransactionListing]: every transactional.id of every broker (each lists the
        ones it coordinates), sorted by id, optionally only in ``states`` and starting with
        ``prefix``. As Kafka's ``ListTransactionsResult.all()``, a listing that may be incomplete
        fails (``CoordinatorNotAvailableError``): a broker that does not answer, or a
        ``__transaction_state`` partition whose leader is not among those that answered, could hold
        transactions that are missing. A coordinator still loading its state is asked again until
        the request timeout; with ``retry_loading`` False (default: :attr:`retry_loading_listings`)
        the listing fails at once instead, as the exactly-once committer's must: the admin client's
        one thread would hold the batch's EndTxns behind it. Retrying, the listing is taken again
        when a ``__transaction_state`` partition's leader moved while it was taken (the old leader
        may have answered after giving the partition up, the new one before taking it)."""
        retry = self.retry_loading_listings if retry_loading is None else retry_loading

        def call():
            deadline = time.monotonic() + (request_timeout or self.cluster.timeout)
            while True:
                try:
                    listed = self._list_everywhere(states or [], prefix, deadline, settled=retry)
                    return [("transactions", sorted(listed.values(), key=lambda t: t.transactional_id))]
                except CoordinatorLoadInProgressError as e:
                    if not retry or time.monotonic() + 0.1 >= deadline:
                        raise _incomplete(e.message) from e
                    time.sleep(0.1)   # Kafka's handler backs off and asks that broker again
        return self._fan_out(["transactions"], call, lambda r: r)["transactions"]

    def _list_everywhere(self, states: list[str], prefix: str, deadline: float,
                         settled: bool = False) -> dict[str, TransactionListing]:
        metadata = self.cluster.refresh(all_topics=False, topics=[TXN_STATE_TOPIC], timeout=_left(deadline))
        found: dict[str, TransactionListing] = {}
        answered = set()
        for node in sorted(b.node_id for b in metadata.brokers):
            try:
                response = self.cluster.call("ListTransactions", pb.ListTransactionsRequest(
                    states=states, prefix=prefix), node, _left(deadline))
            except CoordinatorLoadInProgressError:
                raise
            except RiverlogError as e:
                raise _incomplete(f"broker {node} did not answer ListTransactions ({e.name}: {e.message})") from e
            answered.add(node)
            for t in response.transactions:
                found.setdefault(t.transactional_id, TransactionListing(
                    t.transactional_id, t.producer_id, t.state, t.coordinator))
        for tm in metadata.topics:
            if tm.name != TXN_STATE_TOPIC or tm.error_code:
                continue            # not created yet: no transactional.id was ever used
            for p in tm.partitions:
                if p.leader not in answered:
                    who = "has no leader" if p.leader < 0 else f"is led by broker {p.leader}, which was not asked"
                    raise _incomplete(f"{TXN_STATE_TOPIC}-{p.partition} {who}")
        if settled:
            after = self.cluster.refresh(all_topics=False, topics=[TXN_STATE_TOPIC], timeout=_left(deadline))
            if _leaders(after) != _leaders(metadata):
                raise CoordinatorLoadInProgressError(f"a {TXN_STATE_TOPIC} partition's leader moved while the "
                                                     "transactions were listed")
        return found

    def describe_transactions(self, transactional_ids: list[str],
                              request_timeout: float | None = None) -> dict[str, Future]:
        """A future per transactional.id of :class:`TransactionDescription`; an unknown id fails with
        TransactionalIdNotFoundError."""
        ids = list(dict.fromkeys(transactional_ids))

        def call():
            out = {}
            for txn_id in ids:
                try:
                    out[txn_id] = self._describe_one(txn_id, request_timeout)
                except RiverlogError as e:
                    out[txn_id] = e
            return out
        return self._fan_out(ids, call, lambda results: results.items())

    def abort_transaction(self, transactional_id: str, request_timeout: float | None = None) -> Future:
        """Abort the open transaction of ``transactional_id``; a future of ``(producer_id, producer_epoch)``,
        the epoch now current (the producer that opened the transaction is fenced). Fails with
        InvalidTxnStateError when it has no open transaction, TransactionalIdNotFoundError when unknown."""
        def call():
            # A retry after ConcurrentTransactions (markers still being written) finishes the same abort.
            r = self._txn_coordinator(transactional_id).call(
                "AbortTransaction", pb.AbortTransactionRequest(transactional_id=transactional_id), request_timeout)
            return [(transactional_id, (r.producer_id, r.producer_epoch))]
        return self._fan_out([transactional_id], call, lambda r: r)[transactional_id]

    def commit_transactions(self, handles: list[TransactionHandle],
                            request_timeout: float | None = None) -> dict[str, Future]:
        """Commit each handle's transaction; a future per transactional.id, resolving to None.

        Committing a transaction that this handle already committed succeeds again, so a process
        that restarts in the middle may simply repeat itself. A transaction that can no longer
        commit fails its future: ProducerFencedError (a newer epoch took the transactional.id
        over, e.g. the coordinator aborted it after ``transaction.timeout.ms``),
        InvalidTxnStateError, InvalidProducerIdMappingError (the id expired), as Kafka answers EndTxn.
        The handles are ended in parallel."""
        return self._end_by_handles(handles, True, request_timeout)

    def abort_transactions(self, handles: list[TransactionHandle],
                           request_timeout: float | None = None) -> dict[str, Future]:
        """Abort each handle's transaction; a future per transactional.id, resolving to None.

        Unlike :meth:`abort_transaction` (by id: whatever is open, and the producer is fenced),
        this ends exactly the handle's transaction with the handle's own epoch, as its producer's
        ``abort_transaction()`` would: a newer epoch of the same id is left alone (the future
        fails with ProducerFencedError)."""
        return self._end_by_handles(handles, False, request_timeout)

    def _end_by_handles(self, handles: list[TransactionHandle], commit: bool,
                        timeout: float | None) -> dict[str, Future]:
        by_id = {h.transactional_id: h for h in handles}

        def end(handle: TransactionHandle):
            try:
                self._txn_coordinator(handle.transactional_id).call("EndTxn", pb.EndTxnRequest(
                    transactional_id=handle.transactional_id, producer_id=handle.producer_id,
                    producer_epoch=handle.producer_epoch, commit=commit), timeout)
                return None
            except RiverlogError as e:
                return e

        def call():
            # One admin call, its EndTxns side by side: each waits for its own coordinator.
            if len(by_id) <= 1:
                return [(txn_id, end(h)) for txn_id, h in by_id.items()]
            with ThreadPoolExecutor(min(16, len(by_id)), thread_name_prefix="riverlog-end-txn") as pool:
                outcomes = {txn_id: pool.submit(end, h) for txn_id, h in by_id.items()}
                return [(txn_id, f.result()) for txn_id, f in outcomes.items()]
        return self._fan_out(list(by_id), call, lambda results: results)

    def describe_producers(self, partitions: list[TopicPartition],
                           request_timeout: float | None = None) -> dict[TopicPartition, Future]:
        """A future per partition of :class:`PartitionProducers`: the last stable offset, the high
        watermark and the open transactions, oldest first (the first holds the last stable offset back).
        Asked of each partition's leader."""
        wanted = list(dict.fromkeys(partitions))

        def call():
            return {tp: self._producers_at_leader(tp, request_timeout) for tp in wanted}
        return self._fan_out(wanted, call, lambda results: results.items())

    def _producers_at_leader(self, tp: TopicPartition, timeout: float | None):
        return self._at_leader(
            tp, "DescribeProducers", pb.DescribeProducersRequest(partitions=grouped([tp])), timeout,
            lambda response: response.partitions[0],
            lambda r: PartitionProducers(r.last_stable_offset, r.high_watermark, [
                OpenTransaction(o.producer_id, o.producer_epoch, o.first_offset, o.start_ms)
                for o in r.open_transactions], [
                ActiveProducer(a.producer_id, a.producer_epoch, a.last_sequence, a.last_timestamp,
                               a.current_txn_start_offset) for a in r.active_producers]))
