"""Exactly-once writes by many producers, committed by one process: decide, record, then end.

An *owner* (a Spark sink, a Streams application, a Connect task) writes its output in numbered
*batches*. Every *task* of a batch writes each *attempt* inside its own transaction, named by
:func:`transactional_id` (owner, batch, task, attempt), and hands its :class:`TransactionHandle`
(``Producer.transaction_handle()``) to one committer, without committing. The committer then:

1. **decides**: the attempts that make up the batch (a :class:`Decision`);
2. **records** the decision durably (``acks=all``) in the compacted topic :data:`DECISIONS_TOPIC`;
3. **ends** the transactions: commits exactly the decided ones by their handles, and aborts every
   other open transaction of the batch (failed, killed, speculative or earlier-run attempts), and
   of every earlier batch of the owner (:func:`strays`): an attempt that opened its transaction
   after its own batch's committer looked (a speculative duplicate Spark killed once the other
   attempt won) is found by the next batch's. Nothing else ends such a transaction before
   ``transaction.timeout.ms``, and while it is open it holds its partitions' last stable offset,
   so no ``read_committed`` reader sees anything written after it (Kafka's "hanging
   transactions", KIP-664, which ``kafka-transactions.sh find-hanging``/``abort`` end by hand).

A batch may also carry its owner's input progress (Kafka's ``sendOffsetsToTransaction``): the
committer opens one more transaction of its own in the batch, the **offsets attempt**
(:func:`offsets_transactional_id`), sends the consumer group's offsets in it and adds its handle to
the decision *before* recording it, so those offsets commit with the output, exactly once, and a
replay of a decided batch finishes the recorded offsets instead of sending new ones. The same
attempt carries the batch's **committer records** when the owner has some (records only the
committer can write, such as Connect's source offsets, which Spark's offset log names only once
the batch is planned): produced in it, decided with the output, never sent twice.

Because the decision is recorded before any transaction ends, a committer that dies midway leaves
enough behind: the replay of the same batch finds the decision, its tasks write nothing
(:data:`SKIP`), and its commit finishes exactly the recorded transactions (committing one twice
is harmless). The decisions are pure functions (:mod:`broker.client.batch_decision`);
:class:`DecisionLog` (:mod:`broker.client.decision_log`, which documents the decision records) and
:class:`ExactlyOnce` carry them out with the public client.

    eo = ExactlyOnce({"bootstrap.servers": servers}, owner="clicks-per-minute")
    if eo.write_action(batch) == WRITE:                                      # in each task
        p = Producer({"bootstrap.servers": servers, "transactional.id": eo.transactional_id(batch, task, 0)})
        p.init_transactions(); p.begin_transaction(); p.produce(...); p.flush()
        handle = p.transaction_handle()                                      # sent to the committer
    eo.commit(batch, handles)                                                # in the committer
    eo.commit(batch, handles, offsets=[TopicPartition("orders", 0, 1042)], group_id="enricher")  # with input progress
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from broker.client.admin import AdminClient
from broker.client.batch_decision import (OFFSETS_ATTEMPT, SKIP, WRITE, Decision, OwnerReusedError,  # noqa: F401
                                          attempt_batch, batch_prefix, decide, decision_key, group_offsets,
                                          in_batch, on_abort, offsets_transactional_id, strays, transactional_id,
                                          write_action)
from broker.client.consumer import ConsumerGroupMetadata
from broker.client.decision_log import DECISIONS_TOPIC, DecisionLog, _last_with_key  # noqa: F401 (public here too)
from broker.client.message import TopicPartition
from broker.client.producer import Producer
from broker.client.txn_admin import TransactionHandle
from broker.errors import (ApplicationRecoverableError, CoordinatorNotAvailableError, InvalidConfigError,
                           InvalidTxnStateError, KafkaTimeoutError, TransactionalIdNotFoundError)

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------ carrying them out
ONGOING = "Ongoing"
# Answers that mean a handle can no longer end its transaction: fenced (Kafka's ApplicationRecoverable
# category: ProducerFenced, InvalidProducerEpoch, InvalidProducerIdMapping, which is also EndTxn's answer
# once its transactional.id expired), already ended the other way, or (an abort by id) an unknown id.
_CANNOT_END = (ApplicationRecoverableError, InvalidTxnStateError, TransactionalIdNotFoundError)


class TransactionLostError(InvalidTxnStateError):
    """A decided transaction can no longer commit (its coordinator aborted it, e.g. after
    ``transaction.timeout.ms``): that part of the batch is lost and its owner must stop."""


class ExactlyOnce:
    """One owner's side of the protocol: what its tasks do, and its committer's decide, record, end.

        eo = ExactlyOnce(config, "orders-enricher")
        eo.write_action(7)                       # WRITE, or SKIP on the replay of a decided batch
        eo.commit(7, handles)                    # decide, record, commit the handles, abort the rest
        eo.commit(7, handles, offsets=[TopicPartition("orders", 0, 1042)], group_id="orders-enricher")
        eo.abort(7, handles)                     # the batch failed: abort all but a recorded decision

    ``config`` holds connection settings only; the admin client is made on first use, so tasks that
    only ask :meth:`write_action` open none. Not thread-safe: one committer per owner.
    """

    def __init__(self, config: dict, owner: str, log: DecisionLog | None = None, timeout: float = 60.0,
                 transaction_timeout_ms: int | None = None):
        self.config = config
        self.owner = owner
        self.log = log or DecisionLog(config)
        self.timeout = timeout
        # The offsets attempt's transaction.timeout.ms (None: the producer's default); give it the
        # tasks' value, so a committer that dies after recording has as long to come back.
        self.transaction_timeout_ms = transaction_timeout_ms
        self._admin: AdminClient | None = None

    def transactional_id(self, batch_id: int, task: int, attempt: int) -> str:
        return transactional_id(self.owner, batch_id, task, attempt)

    def write_action(self, batch_id: int) -> str:
        """WRITE, or SKIP when this batch is already decided (a replay): its tasks write nothing."""
        return write_action(self.log.latest(self.owner), batch_id)

    def commit(self, batch_id: int, attempts: list[TransactionHandle], record: bool = True, *,
               offsets: list[TopicPartition] | None = None, group_id: str | None = None,
               undecided: bool = False, records: Callable[[], Iterable[tuple]] | None = None) -> Decision:
        """Decide ``batch_id`` from the attempts its tasks reported (or finish the decision already
        recorded for it), record the decision, commit its transactions and abort every other open
        attempt of the batch. ``record=False``: commit the attempts together without recording
        (nothing then recognises a replay). Raises :class:`TransactionLostError` when a decided
        transaction can no longer commit.

        ``offsets`` (next offsets to read) for consumer group ``group_id``: the batch's input
        progress, committed with its output by the offsets attempt (module docstring). Only a batch
        not decided yet sends them; the replay of a decided batch commits the recorded ones, and an
        older batch than the decided one is refused (:class:`OwnerReusedError`) before anything is
        sent, so the group's offsets never move back. The group must have no active members (a
        "simple" group, as Kafka's ``sendOffsetsToTransaction`` without a generation).

        ``records``: a function giving the batch's committer records, ``(topic, partition, key,
        value)`` tuples (partition -1: the producer's partitioner). Called only for a batch not
        decided yet; they are produced in the offsets attempt, with the offsets if there are any.

        ``undecided``: the caller knows that neither this batch nor a later one is decided (its
        tasks asked :meth:`write_action` and were told WRITE), so the log is not read again.

        The owner's open attempts are listed on the admin client's thread while the decision is
        recorded (one round trip less on the batch's path), and every one of this or an earlier
        batch outside the decision is aborted (:func:`strays`); an attempt that opens after the
        listing is a stray of the next batch's commit."""
        offsets = group_offsets(group_id, offsets)
        if (offsets is not None or records is not None) and not record:
            raise InvalidConfigError("committing offsets or committer records needs record=True: only a recorded "
                                     "decision keeps a replay from committing them again",
                                     config="offsets" if offsets is not None else "records")
        listing = self._list_open()
        recorded = None
        if record:
            recorded = None if undecided else self.log.latest(self.owner)
            if (offsets or records is not None) and write_action(recorded, batch_id) == WRITE:
                extra = list(records()) if records is not None else []
                if offsets or extra:
                    attempts = [*attempts, self._offsets_attempt(batch_id, group_id, offsets, extra)]
            decision, new = decide(recorded, self.owner, batch_id, attempts)
            if new and decision.attempts:
                self.log.record(decision)
        else:
            decision = Decision(self.owner, batch_id, list(attempts))
        for txn_id, future in self.admin.commit_transactions(decision.attempts, self.timeout).items():
            try:
                future.result()
            except _CANNOT_END as e:
                raise TransactionLostError(
                    f"batch {decision.batch_id} of '{decision.owner}': transaction '{txn_id}' was decided but can "
                    f"no longer commit ({e.name}: {e}); its records are lost. Raise the producers' "
                    "transaction.timeout.ms if the committer was down longer than it",
                    transactional_id=txn_id) from e
        self.abort_strays(batch_id, decision, listing, recorded)
        return decision

    def _offsets_attempt(self, batch_id: int, group_id: str | None, offsets: list[TopicPartition] | None,
                         records: list = ()) -> TransactionHandle:
        """Open the batch's offsets attempt, produce ``records`` and send ``offsets`` in it as an
        outsider of the group (no member id, as a simple consumer's commit), and leave it open for
        the decision."""
        config = {**self.config, "transactional.id": offsets_transactional_id(self.owner, batch_id), "linger.ms": 0}
        if self.transaction_timeout_ms is not None:
            config["transaction.timeout.ms"] = self.transaction_timeout_ms
        producer = Producer(config)
        try:
            producer.init_transactions(self.timeout)
            producer.begin_transaction()
            if records:
                errors: list = []
                for topic, partition, key, value in records:
                    producer.produce(topic, value=value, key=key, partition=partition,
                                     on_delivery=lambda err, msg: err is not None and errors.append(err))
                left = producer.flush(self.timeout)
                if errors:
                    raise errors[0].exception()
                if left:
                    raise KafkaTimeoutError(f"{left} committer record(s) of batch {batch_id} of '{self.owner}' were not "
                                            f"delivered within {self.timeout}s; check that the brokers are reachable")
            if offsets:
                producer.send_offsets_to_transaction(offsets, ConsumerGroupMetadata(group_id, "", -1, ""),
                                                     self.timeout)
            return producer.transaction_handle()
        except BaseException:
            try:
                producer.abort_transaction(5)
            except Exception:  # noqa: BLE001 - abort_strays finds it by its id
                pass
            raise
        finally:
            producer.close(1)

    def abort(self, batch_id: int, attempts: list[TransactionHandle], record: bool = True) -> None:
        """The batch failed: abort the reported attempts and every other open one of the batch or
        of an earlier one, except those of a decision already recorded (its replay commits them)."""
        recorded = self.log.latest(self.owner) if record else None
        decision, doomed = on_abort(recorded, batch_id, attempts)
        for txn_id, future in self.admin.abort_transactions(doomed, self.timeout).items():
            try:
                future.result()
            except _CANNOT_END as e:
                log.debug("not aborting %s: %r", txn_id, e)  # ended or fenced already
        self.abort_strays(batch_id, decision, recorded=recorded)

    def _list_open(self):
        """A future of the owner's open transactions, found by the owner's id prefix."""
        return self.admin.list_transactions(self.timeout, states=[ONGOING], prefix=f"{self.owner}-")

    def abort_strays(self, batch_id: int, decision: Decision | None, listing=None,
                     recorded: Decision | None = None) -> list[str]:
        """Abort every open transaction of the batch, or of an earlier batch of the owner, outside
        ``decision`` (:func:`strays`: attempts nobody reported, such as killed tasks, an earlier
        run's, or a speculative duplicate that opened after its batch ended); returns their ids.
        ``recorded``: the decision last read from the log, whose attempts are never aborted either
        when it is of this batch (the log decides: a replay commits them). ``listing``: a
        :meth:`_list_open` future already under way. Aborting by id bumps the epoch, so a stray's
        producer still running is fenced."""
        keep = set()
        for d in (decision, recorded):
            # Only this batch's decision holds its ids: an earlier batch's ended when its commit
            # returned, so an open transaction under one of its ids is a zombie's, opened later.
            if d is not None and d.batch_id == batch_id:
                keep |= d.transactional_ids()
        try:
            listing = (listing or self._list_open()).result()
        except CoordinatorNotAvailableError as e:
            # A broker away must not fail a batch whose decision is committed: the strays wait for
            # the next batch's listing (or transaction.timeout.ms), as Kafka's own would.
            log.warning("open transactions of '%s' not listed, so none aborted this time: %s", self.owner, e)
            return []
        stray = strays([t.transactional_id for t in listing if t.state == ONGOING], self.owner, batch_id, keep)
        futures = [(txn_id, self.admin.abort_transaction(txn_id, self.timeout)) for txn_id in stray]
        for txn_id, future in futures:
            try:
                future.result()
            except _CANNOT_END as e:
                log.debug("not aborting %s: %r", txn_id, e)  # it ended meanwhile
        if stray:
            log.info("aborted %d open transaction(s) of '%s' up to batch %d that no decision holds: %s",
                     len(stray), self.owner, batch_id, ", ".join(stray))
        return stray

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(self.config)
            # A coordinator still loading is not waited for: a batch's EndTxns queue behind the
            # listing on the admin client's one thread; a listing that fails leaves the strays to
            # the next batch.
            self._admin.retry_loading_listings = False
        return self._admin

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def __enter__(self) -> "ExactlyOnce":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
