"""The client port serves clients only: Raft, controller operations, follower fetches and
transaction markers live on the controller and inter-broker listeners, whose dispatch is a table."""
from __future__ import annotations

import json

import grpc
import pytest

from broker.client import AdminClient, Consumer, NewTopic, Producer
from broker.client.cluster import translate_rpc_error
from broker.errors import ClusterAuthorizationFailedError, InvalidRequestError, UnsupportedVersionError
from broker.proto import riverlog_pb2 as pb
from broker.proto import riverlog_pb2_grpc as pb_grpc
from tests.conftest import wait_until

pytestmark = [pytest.mark.integration]


def _inter_broker_address(b) -> str:
    line = wait_until(lambda: next((line for line in b.output if "inter-broker listener on" in line), None),
                      10, 0.02, "the inter-broker listener's line")
    return line.strip().rsplit(" ", 1)[1]


def _call(channel, method: str, body: bytes = b"{}"):
    stub = pb_grpc.RiverlogInternalStub(channel)
    try:
        return json.loads(stub.Call(pb.InternalRequest(method=method, body=body), timeout=10).body or b"{}")
    except grpc.RpcError as e:
        raise translate_rpc_error(e, f"internal {method}") from None


def _round_trip(bootstrap: str, topic: str) -> None:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": bootstrap})
    p.produce(topic, b"still-serving")
    assert p.flush(10) == 0
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    try:
        msg = wait_until(lambda: c.poll(0.5), 30, 0, "the record")
        assert msg.value() == b"still-serving"
    finally:
        c.close()


def test_the_client_listener_does_not_serve_the_internal_service(broker_factory):
    b = broker_factory()
    with grpc.insecure_channel(b.bootstrap) as channel:
        for method in ("_init__", "__init__", "raft", "controller", "fetch_metadata", "offset_for_leader_epoch"):
            with pytest.raises(UnsupportedVersionError):
                _call(channel, method)
    _round_trip(b.bootstrap, "after-internal-calls")


def test_inter_broker_requests_are_refused_on_the_client_listener(broker_factory):
    b = broker_factory()
    with AdminClient({"bootstrap.servers": b.bootstrap}) as admin:
        admin.create_topics([NewTopic("guarded", 1)])["guarded"].result(30)
    with grpc.insecure_channel(b.bootstrap) as channel:
        stub = pb_grpc.RiverlogStub(channel)
        markers = pb.WriteTxnMarkersRequest(producer_id=1, producer_epoch=0, commit=True, timeout_ms=1000)
        with pytest.raises(grpc.RpcError) as caught:
            stub.WriteTxnMarkers(markers, timeout=10)
        assert isinstance(translate_rpc_error(caught.value, "markers"), ClusterAuthorizationFailedError)
        follower_fetch = pb.FetchRequest(replica_id=7, max_wait_ms=0, topics=[pb.FetchTopic(
            name="guarded", partitions=[pb.FetchPartition(partition=0, fetch_offset=0)])])
        with pytest.raises(grpc.RpcError) as caught:
            stub.Fetch(follower_fetch, timeout=10)
        assert isinstance(translate_rpc_error(caught.value, "fetch"), ClusterAuthorizationFailedError)


def test_the_inter_broker_listener_dispatches_only_its_own_methods_and_checks_bodies(broker_factory):
    b = broker_factory()
    with AdminClient({"bootstrap.servers": b.bootstrap}) as admin:
        admin.create_topics([NewTopic("epochs", 1)])["epochs"].result(30)
    with grpc.insecure_channel(_inter_broker_address(b)) as channel:
        for method in ("_init__", "__init__", "_runtime", "raft", "controller"):
            with pytest.raises(InvalidRequestError, match="unknown internal method"):
                _call(channel, method)
        with pytest.raises(InvalidRequestError, match="not JSON"):
            _call(channel, "offset_for_leader_epoch", b"{not json")
        with pytest.raises(InvalidRequestError, match="'partitions' must be list"):
            _call(channel, "offset_for_leader_epoch", b'{"partitions": 5}')
        with pytest.raises(InvalidRequestError, match="lacks field 'partitions'"):
            _call(channel, "offset_for_leader_epoch", b"{}")
        reply = _call(channel, "offset_for_leader_epoch", json.dumps({"partitions": [
            {"topic": "epochs", "partition": 0, "leader_epoch": 0}, {"topic": "epochs"}]}).encode())
        assert reply["partitions"][0] == {"leader_epoch": 0, "end_offset": 0}
        assert reply["partitions"][1]["error_code"] == InvalidRequestError.code
    _round_trip(b.bootstrap, "after-bad-internal-calls")


@pytest.mark.slow
def test_a_quorum_survives_malformed_calls_on_its_controller_listener(cluster_factory):
    cluster = cluster_factory(3)
    voters = cluster.nodes[1].quorum.split(",")
    for voter in voters:
        with grpc.insecure_channel(voter.split("@", 1)[1]) as channel:
            with pytest.raises(InvalidRequestError, match="unknown internal method"):
                _call(channel, "_init__")
            with pytest.raises(InvalidRequestError, match="malformed Raft message"):
                _call(channel, "raft", json.dumps({"src": 1, "message": {"type": "VoteRequest"}}).encode())
            with pytest.raises(InvalidRequestError, match="not a voter"):
                _call(channel, "raft", json.dumps({"src": 99, "message": {}}).encode())
            with pytest.raises(InvalidRequestError, match="'offset' must be int"):
                _call(channel, "fetch_metadata", b'{"offset": "x"}')
    with AdminClient({"bootstrap.servers": cluster.bootstrap}) as admin:
        admin.create_topics([NewTopic("replicated", 1, 3)])["replicated"].result(30)
    p = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    p.produce("replicated", b"x")
    assert p.flush(20) == 0
    wait_until(lambda: sorted(cluster.partition("replicated", 0).isr) == [1, 2, 3], 30, 0.1, "a full ISR")
