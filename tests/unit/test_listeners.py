"""The listener plan: which socket serves clients, brokers and controllers (pure)."""
from __future__ import annotations

import pytest

from broker.config import BROKER_CONFIG
from broker.errors import InvalidConfigError, InvalidRequestError
from broker.server.internal import BROKER_METHODS, CONTROLLER_METHODS, InternalHandlers
from broker.server.listeners import parse_listeners, plan_listeners

pytestmark = [pytest.mark.unit]


def _plan(voter=None, **values):
    return plan_listeners(BROKER_CONFIG.parse({k.replace("_", "."): v for k, v in values.items()}), voter)


def test_a_bare_address_is_the_client_listener_and_the_inter_broker_one_gets_a_free_port():
    plan = _plan(listeners="10.0.0.5:9092")
    assert plan.client == ("10.0.0.5", 9092)
    assert plan.inter_broker == ("10.0.0.5", 0)
    assert plan.controller is None


def test_kafka_style_named_listeners():
    plan = _plan(("h", 9093),
                 listeners="PLAINTEXT://h:9092,REPLICATION://h:9094,CONTROLLER://h:9093",
                 advertised_listeners="PLAINTEXT://public:19092")
    assert (plan.client, plan.inter_broker, plan.controller) == (("h", 9092), ("h", 9094), ("h", 9093))
    assert plan.advertised_client == ("public", 19092)


@pytest.mark.parametrize("values, voter, fragment", [
    ({"listeners": "PLAINTEXT://h:9092,REPLICATION://h:9092"}, None, "which is the client listener's"),
    ({"listeners": "h:9092"}, ("h", 9092), "which is the client listener's"),
    ({"listeners": "PLAINTEXT://h:9092,CONTROLLER://h:9095"}, ("h", 9093), "must agree"),
    ({"listeners": "PLAINTEXT://h:9092,EXTERNAL://h:9096"}, None, "exactly one client listener"),
    ({"listeners": "h:99999"}, None, "port from 0 to 65535"),
    ({"listeners": "PLAINTEXT://h:1,PLAINTEXT://h:2"}, None, "twice"),
    ({"inter.broker.listener.name": "CONTROLLER"}, None, "must not be one of"),
])
def test_listener_plans_that_would_expose_or_confuse_are_refused(values, voter, fragment):
    with pytest.raises(InvalidConfigError, match=fragment):
        plan_listeners(BROKER_CONFIG.parse(values), voter)


def test_parse_listeners_uppercases_names_and_defaults_the_host():
    assert parse_listeners("replication://:0, plaintext://[::1]:9092") == {
        "REPLICATION": ("127.0.0.1", 0), "PLAINTEXT": ("::1", 9092)}


class _Node:
    node_id, runtime, voters = 1, None, {1: ("h", 1)}


@pytest.mark.parametrize("methods, method", [
    (BROKER_METHODS, "_init__"), (BROKER_METHODS, "__init__"), (BROKER_METHODS, "raft"),
    (BROKER_METHODS, "_offset_for_leader_epoch"), (CONTROLLER_METHODS, "offset_for_leader_epoch"),
    (CONTROLLER_METHODS, "call"), (CONTROLLER_METHODS, "_runtime"),
])
def test_internal_dispatch_reaches_only_the_listener_s_table(methods, method):
    handlers = InternalHandlers(_Node(), methods)
    with pytest.raises(InvalidRequestError, match="unknown internal method"):
        handlers.call(method, {})
    assert handlers.broker.node_id == 1


@pytest.mark.parametrize("method, body, fragment", [
    ("fetch_metadata", [], "must be a JSON object"),
    ("fetch_metadata", {}, "lacks field 'offset'"),
    ("fetch_metadata", {"offset": True}, "'offset' must be int"),
    ("controller", {"method": "create_topic", "body": "x"}, "'body' must be dict"),
    ("raft", {"src": "1", "message": {}}, "'src' must be int"),
])
def test_internal_bodies_are_checked_before_anything_runs(method, body, fragment):
    with pytest.raises(InvalidRequestError, match=fragment):
        InternalHandlers(_Node(), CONTROLLER_METHODS).call(method, body)
