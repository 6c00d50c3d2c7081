"""A call to this node's own active controller that is not committed in time ends as Kafka's
retriable timeout, on every supported Python (3.10's ``Future.result`` raises
``concurrent.futures.TimeoutError``, not the builtin)."""
from __future__ import annotations

import concurrent.futures

import pytest

from broker.errors import KafkaTimeoutError
from broker.server.controller_client import ControllerClient
from broker.server.peers import Peers

pytestmark = pytest.mark.unit


class _StuckRuntime:
    """An active controller whose operation never commits (its quorum is unreachable)."""
    is_active = True
    leader_id = 1

    def submit(self, fn):
        return concurrent.futures.Future()


def test_an_uncommitted_operation_times_out_as_kafka_timeout():
    client = ControllerClient(1, {1: ("127.0.0.1", 1)}, _StuckRuntime(), Peers(1))
    with pytest.raises(KafkaTimeoutError):
        client.call("allocate_producer_ids", {}, timeout=0.2)
