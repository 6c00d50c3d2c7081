"""An administrator's abort marker: how ``kafka-transactions abort`` ends a hanging transaction.

A hanging transaction is open on a partition under a producer id that no coordinator holds, so no
coordinator will ever write its marker and it holds the partition's last stable offset back for
good. Kafka's ``Admin.abortTransaction(AbortTransactionSpec)`` sends ``WriteTxnMarkers`` (ABORT)
straight to the partition's leader; Riverlog takes that on the client listener too, but only an
ABORT of user topics' partitions (a commit, a group's offsets or an internal topic stay the
coordinators' business on the inter-broker listener):

    refusal(request)                 # None, or why the client listener refuses it
    write_admin_abort(broker, request)   # the WriteTxnMarkersResponse, an error per partition

The partition checks the marker as it checks a coordinator's (Kafka's
``ProducerAppendInfo.appendEndTxnMarker``): an epoch older than the producer's last one there is
``INVALID_PRODUCER_EPOCH``, a coordinator epoch older than its last marker's
``TRANSACTION_COORDINATOR_FENCED``. As in Kafka, a producer with no open transaction there still
gets the marker (it ends nothing, the last stable offset stays): a retried abort whose answer was
lost then succeeds again. A negative coordinator epoch (partitions do not report it, so
``find-hanging`` prints -1) is the producer's last one as the partition knows it, 0 if none.
"""
from __future__ import annotations

from broker.proto import riverlog_pb2 as pb
from broker.server.handlers import INTERNAL_TOPICS
from broker.server.txn_runtime import write_partition_markers

DEFAULT_TIMEOUT_MS = 30_000  # when the request names none (Kafka's request.timeout.ms)


def refusal(request: pb.WriteTxnMarkersRequest) -> str | None:
    """Why the client listener refuses these markers, or None: only an ABORT of partitions (not of
    the internal topics, whose coordinators keep transactions in their own state)."""
    if request.commit:
        return ("WriteTxnMarkers on the client listener only aborts (kafka-transactions abort); a commit marker "
                "is sent by transaction coordinators to the inter-broker listener; clients end transactions "
                "with EndTxn")
    if request.groups or any(g.topic in INTERNAL_TOPICS for g in request.partitions):
        return ("WriteTxnMarkers on the client listener only aborts partitions of user topics; a group's "
                "transactional offsets are ended by its transaction coordinator on the inter-broker listener")
    return None


def coordinator_epoch_for(requested: int, known: int | None) -> int:
    """The coordinator epoch the marker carries: the requested one, or when it is negative the
    producer's last one the partition knows (``known``; None or -1: none, so 0, which no marker
    check refuses)."""
    if requested >= 0:
        return requested
    return max(known if known is not None else -1, 0)


def write_admin_abort(broker, request: pb.WriteTxnMarkersRequest) -> pb.WriteTxnMarkersResponse:
    """Write the abort marker into each partition of ``request`` this broker leads (acks=all);
    a partition's failure is its result's error (``NOT_LEADER_OR_FOLLOWER`` elsewhere,
    ``UNKNOWN_TOPIC_OR_PARTITION``, the marker checks')."""
    def write(partition):
        with partition.lock:   # the producer's coordinator epoch is read where the marker is checked
            entry = partition.producers.producers.get(request.producer_id)
            epoch = coordinator_epoch_for(request.coordinator_epoch, None if entry is None else entry.coordinator_epoch)
            return partition.write_marker(request.producer_id, request.producer_epoch, False, epoch)

    timeout_s = (request.timeout_ms if request.timeout_ms > 0 else DEFAULT_TIMEOUT_MS) / 1000.0
    return write_partition_markers(broker, request, timeout_s, write, deleted_ok=False)


__all__ = ["coordinator_epoch_for", "refusal", "write_admin_abort"]
