"""Producers' and transactions' errors: idempotence sequences, producer ids and epochs, transaction
states and their coordinators (Kafka's codes)."""
from __future__ import annotations

from broker.errors import ApplicationRecoverableError, RetriableError, RiverlogError, S


class OutOfOrderSequenceError(RetriableError):
    ('A producer batch skipped sequence numbers: an earlier batch is missing (the producer resends in '
     'order).')
    code, grpc_status = 45, S.FAILED_PRECONDITION


class UnknownProducerIdError(RiverlogError):
    ('The partition no longer knows this producer (its state expired after producer.id.expiration.ms, or '
     'retention removed its records): an idempotent producer starts a new epoch from sequence 0.')
    code, grpc_status = 59, S.FAILED_PRECONDITION


class InvalidProducerEpochError(ApplicationRecoverableError):
    """A newer instance of this producer (higher epoch) has taken over."""
    code, grpc_status = 47, S.FAILED_PRECONDITION


class InvalidTxnStateError(RiverlogError):
    """The transaction is not in a state that allows this (e.g. commit after an abort)."""
    code, grpc_status = 48, S.FAILED_PRECONDITION


class InvalidProducerIdMappingError(ApplicationRecoverableError):
    """The producer id does not belong to this transactional.id."""
    code, grpc_status = 49, S.FAILED_PRECONDITION


class StateError(InvalidTxnStateError):
    """The client's own state does not allow the call: a transactional producer's (begin twice,
    commit or abort without begin, produce outside a transaction) or a consumer's assignment
    protocol. librdkafka's local ``_STATE``, not the broker's ``INVALID_TXN_STATE``; an
    :class:`InvalidTxnStateError`, so ``except`` clauses for that still catch it."""
    code, name, kafka_code, grpc_status = 1010, "_STATE", -172, S.FAILED_PRECONDITION


class InvalidTxnTimeoutError(RiverlogError):
    code, grpc_status = 50, S.INVALID_ARGUMENT


class ConcurrentTransactionsError(RetriableError):
    """The previous transaction of this transactional.id is still completing."""
    code, grpc_status = 51, S.UNAVAILABLE


class ProducerFencedError(ApplicationRecoverableError):
    """Another producer with the same transactional.id called init_transactions()."""
    code, grpc_status = 90, S.FAILED_PRECONDITION


class TransactionalIdNotFoundError(RiverlogError):
    code, grpc_status = 105, S.NOT_FOUND


class TransactionAbortableError(RiverlogError):
    """The current transaction cannot commit, but the producer is still usable: abort the transaction
    and run it again (Kafka's TRANSACTION_ABORTABLE, KIP-890; the abortable category of KIP-1050,
    which Kafka's Java client keeps to this one class)."""
    code, grpc_status = 120, S.FAILED_PRECONDITION
    txn_requires_abort = True


class TransactionCoordinatorFencedError(RiverlogError):
    """A transaction marker came from a coordinator older than one this partition already heard
    from: a zombie whose ``__transaction_state`` partition has a newer leader (Kafka's
    ``TransactionCoordinatorFencedException``, raised by ``ProducerAppendInfo.appendEndTxnMarker``).
    Only coordinators see it; the old coordinator stops sending markers for the transaction."""
    code, grpc_status = 52, S.FAILED_PRECONDITION
