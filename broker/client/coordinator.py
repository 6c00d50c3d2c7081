"""Calls to a consumer group's coordinator, wherever it currently is.

The coordinator is the leader of the group's ``__consumer_offsets`` partition, so it moves with
partition leadership. A call finds it (FindCoordinator on any broker), sends the request, and on
``NotCoordinator``, ``CoordinatorNotAvailable`` or a broken connection finds it again and retries
until the deadline; ``CoordinatorLoadInProgress`` retries the same broker.
"""
from __future__ import annotations

import base64
import threading
import time
import uuid

import grpc

from broker.client.cluster import ClusterClient, translate_rpc_error
from broker.errors import (CoordinatorNotAvailableError, KafkaTimeoutError, NetworkError, NotCoordinatorError,
                           RiverlogError)
from broker.proto import riverlog_pb2 as pb
from broker.protocol import CoordinatorType

_MOVED = (NotCoordinatorError, CoordinatorNotAvailableError, NetworkError, KafkaTimeoutError)


def new_member_id() -> str:
    """A random member id in Kafka's ``Uuid.toString()`` form (22 URL-safe base64 characters), as
    Kafka's consumer and librdkafka generate theirs for the consumer protocol (KIP-1082)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class CoordinatorClient:
    def __init__(self, cluster: ClusterClient, group_id: str, key_type: int = CoordinatorType.GROUP):
        """``group_id`` is the key: a group id, or a transactional.id with ``CoordinatorType.TRANSACTION``."""
        self.cluster = cluster
        self.group_id = group_id
        self.key_type = key_type
        self._address: str | None = None
        self.node_id = -1
        # The member id of the consumer that owns this client (KIP-1082): made once, so every
        # membership of the consumer, also one started by subscribe() after unsubscribe(), joins
        # under the same id for the consumer's lifetime.
        self.member_id = new_member_id() if key_type == CoordinatorType.GROUP else ""
        self._lock = threading.Lock()

    def forget(self) -> None:
        with self._lock:
            self._address = None

    def address(self, timeout: float) -> str:
        with self._lock:
            if self._address is not None:
                return self._address
        found = self.cluster.call_any("FindCoordinator", pb.FindCoordinatorRequest(
            group_id=self.group_id, key_type=self.key_type), timeout)
        with self._lock:
            self._address, self.node_id = f"{found.host}:{found.port}", found.node_id
            return self._address

    def call(self, method: str, request, timeout: float | None = None):
        """``method`` on the coordinator; retriable failures are retried until ``timeout`` (s)."""
        deadline = time.monotonic() + (self.cluster.timeout if timeout is None else timeout)
        while True:
            remaining = deadline - time.monotonic()
            try:
                address = self.address(max(remaining, 0.1))
                stub = self.cluster.stub_for_address(address)
                return getattr(stub, method)(request, timeout=max(min(remaining, self.cluster.timeout), 0.1))
            except grpc.RpcError as e:
                error = translate_rpc_error(e, method)
            except RiverlogError as e:
                error = e
            if isinstance(error, _MOVED):
                self.forget()
            if not (error.retriable or isinstance(error, NetworkError)) or time.monotonic() + self.cluster.backoff >= deadline:
                raise error
            time.sleep(self.cluster.backoff)
