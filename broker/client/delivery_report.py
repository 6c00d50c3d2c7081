"""What a delivery callback receives: confluent-kafka's ``on_delivery(err, msg)`` arguments for each
record of a batch the sender has settled.

Kept apart from the producer because it is librdkafka's reading of a batch's fate (the offsets and
timestamps each record got, ``_MSG_TIMED_OUT`` for a record out of ``delivery.timeout.ms``), built
on the sender's thread from the batch's columns, while the producer only queues it for ``poll()``.
"""
from __future__ import annotations

import time

from broker.client.message import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Message
from broker.client.producer_batch import ProducerBatch
from broker.errors import KafkaTimeoutError, NetworkError
from broker.errors.kafka_error import KafkaError


def delivery_reports(batch: ProducerBatch, error, base_offset: int = -1, log_append_time: int = -1,
                     now: float | None = None) -> list[tuple]:
    """``(callback, error, message)`` for each record of ``batch`` that has a callback: its offset
    (from ``base_offset``, -1 when it failed), its timestamp (``log_append_time`` when the topic uses
    LogAppendTime), its headers as the consumer gives them and its ``latency()``: seconds from
    produce() to this report, as librdkafka's ``rd_kafka_message_latency``, here counted from when
    the batch's first record was produced (``batch.created``, on the monotonic clock; ``now``
    defaults to it), so a later record of the batch may read up to linger.ms more."""
    latency = max(0.0, (time.monotonic() if now is None else now) - batch.created)
    reports = []
    keys = batch.records.column(0).to_pylist()
    values = batch.records.column(1).to_pylist()
    stamps = batch.records.column(2).to_pylist()
    column = batch.records.column(3)
    headers = column.to_pylist() if column.null_count < len(column) else None
    kind = TIMESTAMP_LOG_APPEND_TIME if log_append_time >= 0 else TIMESTAMP_CREATE_TIME
    err = delivery_error(error)
    for i, cb in enumerate(batch.callbacks):
        if cb is not None:
            offset = base_offset + i if base_offset >= 0 else -1
            ts = log_append_time if log_append_time >= 0 else stamps[i]
            h = headers[i] if headers is not None else None   # as the consumer gives them
            reports.append((cb, err, Message._record(batch.topic, batch.partition, offset, keys[i], values[i],
                                                     None if h is None else [(e["key"], e["value"]) for e in h],
                                                     ts, kind, err, latency)))
    return reports


def delivery_error(error) -> KafkaError | None:
    """What a delivery callback receives, as confluent-kafka: a KafkaError (a record that ran out of
    delivery.timeout.ms reports librdkafka's _MSG_TIMED_OUT; one whose last attempt was lost with
    its connection, out of retries, _TRANSPORT, as librdkafka fails it); ``err.exception()`` is the
    typed error."""
    if error is None:
        return None
    if isinstance(error, KafkaTimeoutError):
        return KafkaError._of(error, KafkaError._MSG_TIMED_OUT)
    if type(error) is NetworkError:
        return KafkaError._of(error, KafkaError._TRANSPORT)
    # QueuePurgedError/InFlightPurgedError carry _PURGE_QUEUE/_PURGE_INFLIGHT as their kafka_code.
    return KafkaError.of(error)
