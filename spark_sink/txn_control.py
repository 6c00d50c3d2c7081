"""Ending the task attempts' transactions from the driver, where their producers no longer exist.

A commit is ``EndTxn(commit=True)`` sent with the attempt's producer id and epoch, exactly what
its producer's ``commit_transaction()`` would have sent; it is idempotent, so a replayed commit of
an already committed transaction succeeds again. Stray attempts are aborted with
``AbortTransaction``, which also fences them should they still be running.
"""
from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor

from broker.client import AdminClient
from broker.client.coordinator import CoordinatorClient
from broker.errors import ApplicationRecoverableError, InvalidTxnStateError, TransactionalIdNotFoundError
from broker.proto import riverlog_pb2 as pb
from broker.protocol import CoordinatorType
from spark_sink.protocol import Attempt, Decision, batch_prefix, to_abort

log = logging.getLogger(__name__)
ONGOING = "Ongoing"
# EndTxn's answers that mean this attempt's producer id and epoch can no longer end its transaction:
# fenced (Kafka's ApplicationRecoverable category: ProducerFenced, InvalidProducerEpoch,
# InvalidProducerIdMapping), already ended, or its transactional.id expired.
_CANNOT_END = (ApplicationRecoverableError, InvalidTxnStateError, TransactionalIdNotFoundError)


class TransactionLostError(InvalidTxnStateError):
    """A decided transaction can no longer commit (its coordinator aborted it, e.g. after
    ``transaction.timeout.ms``): that part of the batch is lost and the query must stop."""


class TxnControl:
    def __init__(self, config: dict, timeout: float = 60.0):
        self.admin = AdminClient(config)
        self.timeout = timeout

    def close(self) -> None:
        self.admin.close()

    def _end(self, attempt: Attempt, commit: bool) -> None:
        CoordinatorClient(self.admin.cluster, attempt.transactional_id, key_type=CoordinatorType.TRANSACTION).call(
            "EndTxn", pb.EndTxnRequest(transactional_id=attempt.transactional_id, producer_id=attempt.producer_id,
                                       producer_epoch=attempt.producer_epoch, commit=commit), self.timeout)

    def commit(self, decision: Decision) -> None:
        """Commit every attempt of ``decision`` (again, if an earlier driver already did)."""
        def one(attempt: Attempt):
            try:
                self._end(attempt, True)
            except _CANNOT_END as e:
                raise TransactionLostError(
                    f"batch {decision.batch_id} of sink '{decision.sink_id}': transaction "
                    f"'{attempt.transactional_id}' was decided but can no longer commit ({e.name}: {e}); its "
                    "records are lost. Raise riverlog.transaction.timeout.ms if the driver was down longer than it",
                    transactional_id=attempt.transactional_id) from e
        self._each(one, decision.attempts)

    def abort_attempts(self, attempts: list[Attempt]) -> None:
        """Abort these attempts' open transactions; ones already ended or fenced are left as they are."""
        def one(attempt: Attempt):
            try:
                self._end(attempt, False)
            except _CANNOT_END as e:
                log.debug("not aborting %s: %r", attempt.transactional_id, e)
        self._each(one, attempts)

    def abort_strays(self, sink_id: str, batch_id: int, decision: Decision | None) -> list[str]:
        """Abort every open transaction of the batch that is not in its decision; returns their ids."""
        listing = self.admin.list_transactions(self.timeout, states=[ONGOING],
                                               prefix=batch_prefix(sink_id, batch_id)).result()
        stray = to_abort([t.transactional_id for t in listing if t.state == ONGOING], sink_id, batch_id, decision)

        def one(txn_id: str):
            try:
                self.admin.abort_transaction(txn_id, self.timeout).result()
            except InvalidTxnStateError:
                pass  # it ended meanwhile
        self._each(one, stray)
        return stray

    @staticmethod
    def _each(fn, items) -> None:
        items = list(items)
        if len(items) <= 1:
            for item in items:
                fn(item)
            return
        with ThreadPoolExecutor(min(16, len(items))) as pool:
            for f in [pool.submit(fn, item) for item in items]:
                f.result()
