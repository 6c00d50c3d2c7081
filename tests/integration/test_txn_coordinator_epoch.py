"""Transaction markers carry the coordinator epoch (Kafka's ``EndTransactionMarker.coordinatorEpoch``,
the leader epoch of the ``__transaction_state`` partition), and a partition refuses a marker of a
deposed coordinator with ``TRANSACTION_COORDINATOR_FENCED`` (``ProducerAppendInfo.appendEndTxnMarker``):
otherwise a coordinator that lost its partition, still retrying a commit its successor already
finished, would end the producer's next transaction early and show its records to read_committed
readers before the producer decided."""
from __future__ import annotations

import grpc
import pytest

from broker.client import Producer
from broker.errors import TransactionCoordinatorFencedError, error_for_code
from broker.proto import riverlog_pb2 as pb
from broker.proto import riverlog_pb2_grpc as pb_grpc
from tests.conftest import wait_until
from tests.integration.test_cluster import FAST, create
from tests.integration.test_listeners import _inter_broker_address
from tests.integration.test_transactions import read

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

CONFIG = {**FAST, "transaction.state.log.num.partitions": 1}


def _txn_state_leader(cluster) -> int | None:
    try:
        return cluster.partition("__transaction_state", 0).leader
    except Exception:  # noqa: BLE001 - the cluster may be moving
        return None


def test_a_deposed_coordinators_marker_cannot_end_the_next_transaction(cluster_factory, topic_name):
    cluster = cluster_factory(3, CONFIG)
    create(cluster, topic_name, partitions=1, rf=3, min_insync_replicas=2)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": f"{topic_name}-app", "linger.ms": 1})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic_name, b"one")
    p.commit_transaction(30)                       # markers of the first coordinator (its epoch)
    first = wait_until(lambda: _txn_state_leader(cluster), 10, 0.1, "the transaction coordinator")

    cluster.nodes[first].kill9()                   # __transaction_state-0 moves: a newer leader epoch
    wait_until(lambda: _txn_state_leader(cluster) not in (None, -1, first), 30, 0.1, "a new coordinator")
    p.begin_transaction()
    p.produce(topic_name, b"two")
    p.commit_transaction(60)                       # markers of the new coordinator

    p.begin_transaction()
    p.produce(topic_name, b"three-undecided")
    assert p.flush(30) == 0
    handle = p.transaction_handle()
    leader = cluster.partition(topic_name, 0).leader
    # What the deposed coordinator would still send: a commit under its own (older) coordinator epoch.
    stale = pb.WriteTxnMarkersRequest(producer_id=handle.producer_id, producer_epoch=handle.producer_epoch,
                                      commit=True, coordinator_epoch=0, timeout_ms=5000,
                                      partitions=[pb.GroupPartitions(topic=topic_name, partitions=[0])])
    with grpc.insecure_channel(_inter_broker_address(cluster.nodes[leader])) as channel:
        reply = pb_grpc.RiverlogStub(channel).WriteTxnMarkers(stale, timeout=10)
    (result,) = reply.partitions
    assert error_for_code(result.error_code) is TransactionCoordinatorFencedError, result.error_message
    assert read(cluster.bootstrap, topic_name, "read_committed", partitions=1) == [b"one", b"two"]

    p.abort_transaction(30)                        # the current coordinator still ends it
    assert read(cluster.bootstrap, topic_name, "read_committed", partitions=1) == [b"one", b"two"]
