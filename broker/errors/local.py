"""The client's own errors, which librdkafka reports with negative codes; Riverlog's codes are
above 1000 so they never collide with a Kafka code."""
from __future__ import annotations

from broker.errors import RetriableError, RiverlogError, S


class KafkaTimeoutError(RetriableError):
    """A client-side deadline (delivery.timeout.ms, a result() timeout) passed."""
    code, kafka_code, grpc_status = 1001, -185, S.DEADLINE_EXCEEDED  # librdkafka's _TIMED_OUT


class UnknownPartitionError(RiverlogError):
    """An explicit partition number is beyond the topic's partitions."""
    code, kafka_code, grpc_status = 1002, -190, S.NOT_FOUND  # _UNKNOWN_PARTITION


class QueueFullError(RetriableError, BufferError):
    """buffer.memory is used up; serve delivery reports with poll() and retry (a BufferError, as
    confluent-kafka raises)."""
    code, name, kafka_code, grpc_status = 1003, "QUEUE_FULL", -184, S.RESOURCE_EXHAUSTED  # _QUEUE_FULL


class ClientClosedError(RiverlogError, RuntimeError):
    """The client was closed. A ``RuntimeError`` too, as confluent-kafka raises
    ``RuntimeError("Consumer closed")`` / ``("Producer has been closed")``."""
    code, kafka_code, grpc_status = 1004, -197, S.CANCELLED  # _DESTROY


class NotSupportedError(RiverlogError):
    """The call is not supported by this version of Riverlog."""
    code, kafka_code, grpc_status = 1005, -170, S.UNIMPLEMENTED  # _NOT_IMPLEMENTED


class PartitionEOF(RiverlogError):
    """Informational: the consumer reached the end of a partition (only with enable.partition.eof)."""
    code, kafka_code, grpc_status = 1006, -191, S.OUT_OF_RANGE  # _PARTITION_EOF


class QueuePurgedError(RiverlogError):
    """The record was removed from the producer's queue by ``purge()`` before it was sent."""
    code, kafka_code, grpc_status = 1007, -152, S.CANCELLED  # _PURGE_QUEUE


class InFlightPurgedError(RiverlogError):
    """The record was in flight when ``purge()`` ran: the broker may or may not have written it."""
    code, kafka_code, grpc_status = 1008, -151, S.CANCELLED  # _PURGE_INFLIGHT


class BadMessageError(RiverlogError):
    """The producer could not encode a record it had accepted (a field of a type it cannot hold);
    the record is reported failed and the others buffered with it are sent."""
    code, kafka_code, grpc_status = 1009, -199, S.INVALID_ARGUMENT  # _BAD_MSG


class ConflictError(RetriableError):
    """Another transactional call is unfinished: a ``commit_transaction`` that timed out must be
    called again before ``abort_transaction`` (its EndTxn may have been decided), as librdkafka's
    ``rd_kafka_txn_curr_api_begin`` answers (``_CONFLICT``, retriable)."""
    code, name, kafka_code, grpc_status = 1011, "_CONFLICT", -173, S.FAILED_PRECONDITION
