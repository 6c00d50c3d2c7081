"""The exactly-once committer's listing of its open transactions runs on the admin client's one
thread, ahead of the batch's EndTxns. While a ``__transaction_state`` partition is loading (a
leader move), it must not hold them back by asking again until its timeout: it asks once and
leaves the strays to the next batch's listing. ``admin.list_transactions()`` itself (the
``kafka-transactions`` commands) still asks again until its request timeout."""
from __future__ import annotations

import threading

import pytest

from broker.client.admin import AdminClient
from broker.client.exactly_once import ExactlyOnce
from broker.errors import CoordinatorLoadInProgressError, CoordinatorNotAvailableError
from broker.proto import riverlog_pb2 as pb

pytestmark = pytest.mark.unit


class _LoadingCluster:
    """One broker that leads the one ``__transaction_state`` partition and is still loading it."""
    timeout = 30.0

    def __init__(self):
        self.brokers = {0: "127.0.0.1:1"}
        self.asked = 0
        self.lock = threading.Lock()

    def refresh(self, all_topics=False, topics=None, timeout=None):
        response = pb.MetadataResponse(cluster_id="c", controller_id=0)
        response.brokers.add(node_id=0, host="127.0.0.1", port=1)
        tm = response.topics.add(name="__transaction_state")
        tm.partitions.add(partition=0, leader=0)
        return response

    def call(self, method, request, node, timeout=None):
        assert method == "ListTransactions"
        with self.lock:
            self.asked += 1
        raise CoordinatorLoadInProgressError("broker 0 is loading the state of __transaction_state partition(s) [0]")

    def close(self):
        pass


def _admin(cluster) -> AdminClient:
    admin = AdminClient({"bootstrap.servers": "127.0.0.1:1"})
    admin.cluster = cluster
    return admin


def test_the_committers_listing_asks_a_loading_coordinator_once_and_fails_as_incomplete():
    cluster = _LoadingCluster()
    eo = ExactlyOnce({"bootstrap.servers": "127.0.0.1:1"}, "app")
    admin, eo.timeout = eo.admin, 3.0
    admin.cluster = cluster
    try:
        with pytest.raises(CoordinatorNotAvailableError, match="incomplete"):
            eo._list_open().result(60)
        assert cluster.asked == 1
    finally:
        admin.close()


def test_the_admin_listing_asks_a_loading_coordinator_again():
    cluster = _LoadingCluster()
    admin = _admin(cluster)
    try:
        with pytest.raises(CoordinatorNotAvailableError, match="incomplete"):
            admin.list_transactions(request_timeout=0.5).result(60)
        assert cluster.asked > 1
    finally:
        admin.close()


class _MovingCluster:
    """``__transaction_state``-0 moves from broker 0 to broker 1 while the first listing is taken:
    broker 0 answers after giving it up, broker 1 before taking it, so neither lists 'app-1'."""
    timeout = 30.0

    def __init__(self):
        self.brokers = {0: "127.0.0.1:1", 1: "127.0.0.1:2"}
        self.refreshes = 0

    def refresh(self, all_topics=False, topics=None, timeout=None):
        self.refreshes += 1
        leader, epoch = (0, 1) if self.refreshes == 1 else (1, 2)
        response = pb.MetadataResponse(cluster_id="c", controller_id=0)
        for node in (0, 1):
            response.brokers.add(node_id=node, host="127.0.0.1", port=1 + node)
        response.topics.add(name="__transaction_state").partitions.add(partition=0, leader=leader,
                                                                         leader_epoch=epoch)
        return response

    def call(self, method, request, node, timeout=None):
        response = pb.ListTransactionsResponse()
        if node == 1 and self.refreshes > 2:   # the new leader, once it took the partition over
            response.transactions.add(transactional_id="app-1", producer_id=7, state="Ongoing", coordinator=1)
        return response

    def close(self):
        pass


def test_a_listing_taken_while_a_coordinator_moved_is_taken_again():
    cluster = _MovingCluster()
    admin = _admin(cluster)
    try:
        listed = admin.list_transactions(request_timeout=10).result(60)
        assert [(t.transactional_id, t.state) for t in listed] == [("app-1", "Ongoing")]
    finally:
        admin.close()
