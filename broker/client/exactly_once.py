"""Exactly-once writes by many producers, committed by one process: decide, record, then end.

An *owner* (a Spark sink, a Streams application, a Connect task) writes its output in numbered
*batches*. Every *task* of a batch writes each *attempt* inside its own transaction, named by
:func:`transactional_id` (owner, batch, task, attempt), and hands its :class:`TransactionHandle`
(``Producer.transaction_handle()``) to one committer, without committing. The committer then:

1. **decides**: the attempts that make up the batch (a :class:`Decision`);
2. **records** the decision durably (``acks=all``) in the compacted topic :data:`DECISIONS_TOPIC`;
3. **ends** the transactions: commits exactly the decided ones by their handles, and aborts every
   other open transaction of the batch (failed, killed, speculative or earlier-run attempts).

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
is harmless). The decisions are pure functions at the top of this module; :class:`DecisionLog`
and :class:`ExactlyOnce` carry them out with the public client.

    eo = ExactlyOnce({"bootstrap.servers": servers}, owner="clicks-per-minute")
    if eo.write_action(batch) == WRITE:                                      # in each task
        p = Producer({"bootstrap.servers": servers, "transactional.id": eo.transactional_id(batch, task, 0)})
        p.init_transactions(); p.begin_transaction(); p.produce(...); p.flush()
        handle = p.transaction_handle()                                      # sent to the committer
    eo.commit(batch, handles)                                                # in the committer
    eo.commit(batch, handles, offsets=[TopicPartition("orders", 0, 1042)], group_id="enricher")  # with input progress

**Decision records** (the format this module owns): key = the owner id in UTF-8; value = compact
JSON ``{"attempts": [{"producer_epoch": E, "producer_id": P, "transactional_id": T}, ...],
"batch_id": B, "sink_id": OWNER}`` with sorted keys. The ``sink_id`` name predates Streams and
Connect; it stays so that decisions recorded earlier still read. Only an owner's latest decision
matters (the replay is of the last batch at most, and batch ids only grow), so the topic is
compacted and a lookup reads the partition backwards from its end in windows: it costs the same
however long the topic is.
"""
from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field

from broker.client.admin import AdminClient, NewTopic
from broker.client.consumer import Consumer, ConsumerGroupMetadata
from broker.client.message import TopicPartition
from broker.client.producer import Producer
from broker.client.txn_admin import TransactionHandle
from broker.errors import (ApplicationRecoverableError, InvalidConfigError, InvalidTxnStateError, KafkaTimeoutError,
                           RiverlogError, TopicAlreadyExistsError, TransactionalIdNotFoundError, UnknownTopicOrPartitionError)

log = logging.getLogger(__name__)

WRITE, SKIP = "write", "skip"
DECISIONS_TOPIC = "riverlog-sink-commits"
OFFSETS_ATTEMPT = "offsets"  # the committer's own attempt of a batch, after the batch's prefix
_ATTEMPT_TAIL = re.compile(rf"\d+-\d+|{OFFSETS_ATTEMPT}")  # "{task}-{attempt}" or the offsets attempt


# ------------------------------------------------------------------------------ pure decisions
def transactional_id(owner: str, batch_id: int, task: int, attempt: int) -> str:
    """One id per task attempt: a retried or speculative attempt never shares a producer."""
    return f"{batch_prefix(owner, batch_id)}{task}-{attempt}"


def offsets_transactional_id(owner: str, batch_id: int) -> str:
    """The committer's offsets attempt of a batch: one per batch, so a committer that restarts
    before recording fences (and aborts) its predecessor's by ``init_transactions``."""
    return f"{batch_prefix(owner, batch_id)}{OFFSETS_ATTEMPT}"


def batch_prefix(owner: str, batch_id: int) -> str:
    """The start of every attempt's id in one batch ("s-1-" does not start "s-10-0-0")."""
    return f"{owner}-{batch_id}-"


def in_batch(txn_id: str, owner: str, batch_id: int) -> bool:
    """Whether ``txn_id`` is an attempt of this batch of this owner, and not merely starts like one:
    owner "a", batch 1 has prefix "a-1-", which also starts owner "a-1"'s batch 2 ("a-1-2-0-0",
    "a-1-2-offsets"). The tail after the prefix is a task's "{task}-{attempt}" or "offsets"."""
    prefix = batch_prefix(owner, batch_id)
    return txn_id.startswith(prefix) and _ATTEMPT_TAIL.fullmatch(txn_id[len(prefix):]) is not None


@dataclass
class Decision:
    """The attempts whose transactions make up ``batch_id`` of ``owner``, decided to commit."""
    owner: str
    batch_id: int
    attempts: list[TransactionHandle] = field(default_factory=list)

    def key(self) -> bytes:
        return decision_key(self.owner)

    def to_value(self) -> bytes:
        return json.dumps({"sink_id": self.owner, "batch_id": self.batch_id,
                           "attempts": [asdict(a) for a in self.attempts]},
                          sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_value(cls, raw: bytes) -> "Decision":
        v = json.loads(raw)
        return cls(v["sink_id"], v["batch_id"], [TransactionHandle(**a) for a in v["attempts"]])

    def transactional_ids(self) -> set[str]:
        return {a.transactional_id for a in self.attempts}


def decision_key(owner: str) -> bytes:
    return owner.encode()


class OwnerReusedError(InvalidConfigError):
    """An owner asked about a batch older than one it already decided: a new run (a new
    checkpoint) that reuses an old owner id. ``details``: owner, batch_id, decided_batch_id."""


def write_action(decision: Decision | None, batch_id: int) -> str:
    """What a task of ``batch_id`` does, given its owner's latest decision: WRITE, or SKIP when the
    batch is already decided (a replay after the committer died between deciding and ending)."""
    if decision is None or decision.batch_id < batch_id:
        return WRITE
    if decision.batch_id == batch_id:
        return SKIP
    raise OwnerReusedError(
        f"'{decision.owner}' already committed batch {decision.batch_id}, later than batch {batch_id}: an "
        "owner id belongs to one sequence of batches; give a new run a new owner id",
        config="owner", owner=decision.owner, batch_id=batch_id, decided_batch_id=decision.batch_id)


def decide(recorded: Decision | None, owner: str, batch_id: int,
           attempts: list[TransactionHandle]) -> tuple[Decision, bool]:
    """The decision to carry out for ``batch_id`` and whether it still has to be recorded.

    A decision already recorded for this batch wins over the attempts reported now: it is what an
    earlier committer may have started carrying out, and the replay's tasks wrote nothing.
    """
    if recorded is not None and recorded.batch_id == batch_id:
        return recorded, False
    write_action(recorded, batch_id)  # a later recorded batch is refused here too
    return Decision(owner, batch_id, sorted(attempts, key=lambda a: a.transactional_id)), True


def group_offsets(group_id: str | None, offsets) -> list[TopicPartition] | None:
    """The offsets a batch commits for ``group_id`` (None: none), checked: both or neither given,
    a non-empty group, each partition once with a next offset to read of at least 0. Sorted, so
    the offsets attempt sends them in one order."""
    if offsets is None and group_id is None:
        return None
    if offsets is None or not group_id:
        raise InvalidConfigError("offsets and group_id go together: the offsets of which consumer group?"
                                 if offsets is not None else "group_id needs offsets (and must not be empty)",
                                 config="group_id" if offsets is not None else "offsets")
    seen: set[tuple[str, int]] = set()
    for tp in offsets:
        if tp.offset < 0 or tp.partition < 0 or (tp.topic, tp.partition) in seen:
            raise InvalidConfigError(
                f"offset {tp.offset} of {tp.topic} [{tp.partition}] for group '{group_id}': each partition once, with "
                "the next offset to read (0 or more)", config="offsets")
        seen.add((tp.topic, tp.partition))
    return sorted(offsets)


def on_abort(recorded: Decision | None, batch_id: int,
             attempts: list[TransactionHandle]) -> tuple[Decision | None, list[TransactionHandle]]:
    """A failed batch: the decision that still stands (one recorded for this very batch, which its
    replay will commit, so it is never aborted) and the reported attempts to abort (all others)."""
    decision = recorded if recorded is not None and recorded.batch_id == batch_id else None
    keep = decision.transactional_ids() if decision is not None else set()
    return decision, [a for a in attempts if a.transactional_id not in keep]


def to_abort(open_ids: list[str], owner: str, batch_id: int, decision: Decision | None) -> list[str]:
    """Open transactions of the batch's attempts that are not part of its decision: failed,
    killed, speculative or earlier-run attempts. Their records must never become visible."""
    keep = decision.transactional_ids() if decision is not None and decision.batch_id == batch_id else set()
    return sorted(t for t in open_ids if in_batch(t, owner, batch_id) and t not in keep)


# ------------------------------------------------------------------------------ the decisions topic
_WINDOW = 256
_created: set[tuple[str, str]] = set()
_created_lock = threading.Lock()


class DecisionLog:
    """The compacted topic where committers record their decisions (format: the module's docstring).

    ``config`` holds connection settings only (``bootstrap.servers``, ``request.timeout.ms``, ...)."""

    def __init__(self, config: dict, topic: str = DECISIONS_TOPIC):
        self.config = config
        self.topic = topic

    def ensure_topic(self) -> None:
        """Create the topic once per process (a no-op when it exists)."""
        with _created_lock:
            if (self.config["bootstrap.servers"], self.topic) in _created:
                return
        admin = AdminClient(self.config)
        try:
            admin.create_topics([NewTopic(self.topic, 1, config={"cleanup.policy": "compact"})])[self.topic].result()
        except TopicAlreadyExistsError:
            pass
        finally:
            admin.close()
        with _created_lock:
            _created.add((self.config["bootstrap.servers"], self.topic))

    def record(self, decision: Decision, timeout: float = 30.0) -> None:
        """Write ``decision`` and wait until every in-sync replica has it."""
        self.ensure_topic()
        errors: list = []
        producer = Producer({**self.config, "acks": "all", "enable.idempotence": True, "linger.ms": 0})
        try:
            producer.produce(self.topic, value=decision.to_value(), key=decision.key(), partition=0,
                             on_delivery=lambda err, msg: err is not None and errors.append(err))
            left = producer.flush(timeout)
        finally:
            producer.close(1)
        if errors:
            raise errors[0].exception()
        if left:
            raise RiverlogError(f"the decision of batch {decision.batch_id} was not acknowledged in {timeout}s")

    def latest(self, owner: str, timeout: float = 30.0) -> Decision | None:
        """The last decision recorded for ``owner``, or None."""
        key = decision_key(owner)
        consumer = Consumer({**self.config, "group.id": "", "enable.auto.commit": False,
                             "isolation.level": "read_uncommitted", "auto.offset.reset": "earliest"})
        try:
            tp = TopicPartition(self.topic, 0)
            info = consumer.list_topics(self.topic, timeout).topics.get(self.topic)
            if info is None or isinstance(info.error, UnknownTopicOrPartitionError):
                return None  # nothing was ever decided on this cluster (offsets would wait for the topic)
            if info.error is not None:
                raise info.error
            try:
                low, high = consumer.get_watermark_offsets(tp, timeout)
            except UnknownTopicOrPartitionError:
                return None  # nothing was ever decided on this cluster
            end = high
            while end > low:
                start = max(low, end - _WINDOW)
                found = _last_with_key(consumer, tp, start, end, key, timeout)
                if found is not None:
                    return Decision.from_value(found)
                end = start
            return None
        finally:
            consumer.close()


def _last_with_key(consumer: Consumer, tp: TopicPartition, start: int, end: int, key: bytes, timeout: float):
    """The value of the last record with ``key`` in offsets [start, end) (compaction leaves gaps).

    Only reaching ``end`` ends the scan: a quiet fetch on a loaded machine is not the end of the
    log, and stopping there could miss a recorded decision and write a decided batch twice. The
    cleaner never removes a log's last record, so a record at or past ``end`` always arrives."""
    consumer.assign([TopicPartition(tp.topic, tp.partition, start)])
    found = None
    deadline = time.monotonic() + timeout
    while True:
        messages = consumer.consume(1000, max(0.05, min(deadline - time.monotonic(), 1.0)))
        for m in messages:
            if m.error() is not None:
                raise RiverlogError(f"reading {tp.topic}: {m.error()}")
            if m.offset() >= end:
                return found
            if m.key() == key:
                found = m.value()
            if m.offset() == end - 1:
                return found
        if not messages:
            position = consumer.position([TopicPartition(tp.topic, tp.partition)])[0].offset
            if position >= end:
                return found
            if time.monotonic() >= deadline:
                raise KafkaTimeoutError(f"reading the decisions in {tp.topic}-{tp.partition}: offsets up to {end} "
                                        f"did not arrive within {timeout}s (at {position}); retry the batch")


# ------------------------------------------------------------------------------ carrying them out
ONGOING = "Ongoing"
# Answers that mean a handle can no longer end its transaction: fenced (Kafka's ApplicationRecoverable
# category: ProducerFenced, InvalidProducerEpoch, InvalidProducerIdMapping), already ended the other
# way, or its transactional.id expired.
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
        tasks asked :meth:`write_action` and were told WRITE), so the log is not read again. The
        listing of the batch's open attempts runs on the admin client's thread while the decision
        is recorded: one round trip less on the batch's path."""
        offsets = group_offsets(group_id, offsets)
        if (offsets is not None or records is not None) and not record:
            raise InvalidConfigError("committing offsets or committer records needs record=True: only a recorded "
                                     "decision keeps a replay from committing them again",
                                     config="offsets" if offsets is not None else "records")
        listing = self._list_open(batch_id)
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
        self.abort_strays(batch_id, decision, listing)
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
        """The batch failed: abort the reported attempts and every other open one of the batch,
        except those of a decision already recorded for it (its replay commits them)."""
        decision, doomed = on_abort(self.log.latest(self.owner) if record else None, batch_id, attempts)
        for txn_id, future in self.admin.abort_transactions(doomed, self.timeout).items():
            try:
                future.result()
            except _CANNOT_END as e:
                log.debug("not aborting %s: %r", txn_id, e)  # ended or fenced already
        self.abort_strays(batch_id, decision)

    def _list_open(self, batch_id: int):
        """A future of the batch's open transactions (every attempt has started by now)."""
        return self.admin.list_transactions(self.timeout, states=[ONGOING], prefix=batch_prefix(self.owner, batch_id))

    def abort_strays(self, batch_id: int, decision: Decision | None, listing=None) -> list[str]:
        """Abort every open transaction of the batch outside ``decision``, found by its id prefix
        (attempts nobody reported: killed tasks, an earlier run's); returns their ids. ``listing``:
        a :meth:`_list_open` future already under way."""
        listing = (listing or self._list_open(batch_id)).result()
        stray = to_abort([t.transactional_id for t in listing if t.state == ONGOING], self.owner, batch_id, decision)
        futures = [self.admin.abort_transaction(txn_id, self.timeout) for txn_id in stray]
        for future in futures:
            try:
                future.result()
            except InvalidTxnStateError:
                pass  # it ended meanwhile
        return stray

    @property
    def admin(self) -> AdminClient:
        if self._admin is None:
            self._admin = AdminClient(self.config)
        return self._admin

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    def __enter__(self) -> "ExactlyOnce":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
