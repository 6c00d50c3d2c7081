"""Record administration, mixed into :class:`~broker.client.admin.AdminClient` (confluent-kafka's
names): ``list_offsets`` and ``delete_records``, each asked of every partition's leader.

    admin.list_offsets({TopicPartition("orders", 0): OffsetSpec.latest()})[tp].result().offset
    admin.delete_records([TopicPartition("orders", 0, 1000)])[tp].result().low_watermark
"""
from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass

from broker.client.admin_arguments import check_options, check_partitions
from broker.client.admin_fan_out import _error, _has_duplicate_partitions, _left, _refused, _timed_out
from broker.client.message import TopicPartition
from broker.client.model import IsolationLevel
from broker.errors import RiverlogError
from broker.proto import riverlog_pb2 as pb


class OffsetSpec:
    """What list_offsets asks for: earliest, latest, max timestamp, or a time in ms."""

    def __init__(self, value: int):
        self.value = value

    @classmethod
    def earliest(cls):
        return cls(-2)

    @classmethod
    def latest(cls):
        return cls(-1)

    @classmethod
    def max_timestamp(cls):
        return cls(-3)

    @classmethod
    def for_timestamp(cls, ms: int):
        return cls(ms)


@dataclass
class ListOffsetsResultInfo:
    offset: int
    timestamp: int
    leader_epoch: int | None = None


@dataclass
class DeletedRecords:
    """What delete_records resolves to: the partition's new low watermark (its log start offset)."""
    low_watermark: int


class RecordsAdmin:
    """Needs ``self.cluster``, ``self._fan_out``, ``self._at_leader`` and ``self._leader_of`` (from
    AdminClient). ``request_timeout`` bounds the whole call, metadata lookups included."""

    def list_offsets(self, topic_partition_offsets: dict[TopicPartition, OffsetSpec],
                     isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
                     request_timeout: float | None = None) -> dict[TopicPartition, Future]:
        """Future per partition resolving to ListOffsetsResultInfo(offset, timestamp, leader_epoch:
        the epoch that wrote the offset, the leader's for latest, None when unknown). Answers stop
        at the high watermark, or with ``IsolationLevel.READ_COMMITTED`` at the last stable offset:
        the latest offset is that bound, and a lookup by time finding nothing below it gives -1.
        The request is checked first, as confluent-kafka checks it (TypeError/ValueError)."""
        if not isinstance(topic_partition_offsets, dict):
            raise TypeError("Expected topic_partition_offsets to be dict of [TopicPartitions,OffsetSpec] for list "
                            "offsets request")
        check_partitions(topic_partition_offsets, "request")
        if not all(isinstance(spec, OffsetSpec) for spec in topic_partition_offsets.values()):
            raise TypeError("Value must be a OffsetSpec")
        if not isinstance(isolation_level, IsolationLevel):
            raise TypeError("isolation_level argument should be an IsolationLevel")
        check_options(False, request_timeout)
        level = isolation_level.value

        def call():
            results = {}
            deadline = time.monotonic() + (request_timeout or self.cluster.timeout)   # the whole call's
            for tp, spec in topic_partition_offsets.items():
                request = pb.ListOffsetsRequest(isolation_level=level, topics=[pb.ListOffsetsTopic(
                    name=tp.topic, partitions=[pb.ListOffsetsPartition(partition=tp.partition,
                                                                       timestamp=spec.value)])])
                try:
                    node = self._leader_of(tp, deadline)
                    r = self.cluster.call("ListOffsets", request, node, _left(deadline)).topics[0].partitions[0]
                    results[tp] = _error(r.error_code, r.error_message) if r.error_code \
                        else ListOffsetsResultInfo(r.offset, r.timestamp, r.leader_epoch if r.leader_epoch >= 0 else None)
                except RiverlogError as e:
                    results[tp] = _timed_out(e)
            return results

        return self._fan_out(list(topic_partition_offsets), call, lambda results: results.items())

    def delete_records(self, topic_partition_offsets, request_timeout: float | None = None,
                       operation_timeout: float | None = None) -> dict[TopicPartition, Future]:
        """Delete every record below an offset, per partition; a future per partition resolving to
        :class:`DeletedRecords`. Takes confluent-kafka's list of TopicPartition (offset set) or a
        ``{TopicPartition: offset}`` dict; offset -1 deletes up to the high watermark. An offset past
        the high watermark fails with OffsetOutOfRangeError. A partition listed twice fails every
        future with ``_INVALID_ARG`` ("Duplicate partitions not allowed") and deletes nothing, as
        librdkafka's ``rd_kafka_DeleteRecords``.

        A partition is answered once every replica on an alive broker moved its log start there
        (Kafka's ``DelayedDeleteRecords``), so a failover cannot bring the records back; the
        broker waits up to ``operation_timeout`` seconds for that (default: ``request_timeout``),
        then the partition fails with RequestTimedOutError, retried within ``request_timeout``.

            fs = admin.delete_records([TopicPartition("orders", 0, 1000)])
            fs[tp].result().low_watermark     # 1000
        """
        if isinstance(topic_partition_offsets, dict):
            wanted = {tp: offset for tp, offset in topic_partition_offsets.items()}
        elif isinstance(topic_partition_offsets, list):
            check_partitions(topic_partition_offsets)   # before reading their offsets
            wanted = {tp: tp.offset for tp in topic_partition_offsets}
        else:
            raise TypeError(f"Expected Request to be a list, got '{type(topic_partition_offsets).__name__}'")
        check_partitions(wanted)   # a dict's keys
        check_options(False, request_timeout, operation_timeout)
        self._check_open()
        if isinstance(topic_partition_offsets, list) and _has_duplicate_partitions(topic_partition_offsets):
            return _refused(list(wanted), "Duplicate partitions not allowed")   # which offset was meant?

        waited = operation_timeout if operation_timeout is not None else (request_timeout or self.cluster.timeout)
        operation_ms = max(0, int(waited * 1000))

        def call():
            results = {}
            deadline = time.monotonic() + (request_timeout or self.cluster.timeout)   # the whole call's
            for tp, offset in wanted.items():
                request = pb.DeleteRecordsRequest(timeout_ms=operation_ms, topics=[
                    pb.DeleteRecordsTopic(name=tp.topic, partitions=[
                        pb.DeleteRecordsPartition(partition=tp.partition, offset=offset)])])
                results[tp] = self._at_leader(tp, "DeleteRecords", request, request_timeout,
                                              lambda response: response.topics[0].partitions[0],
                                              lambda r: DeletedRecords(r.low_watermark), deadline)
            return results

        return self._fan_out(list(wanted), call, lambda results: results.items())
