"""How a node reaches the active controller, wherever it is (Kafka's ``NodeToControllerChannelManager``):
its own controller runtime when that is active, else each voter in turn over the peer channel,
the last known leader first.

A broker without a Raft of its own learns of elections from the term and leader its metadata
fetches carry (:meth:`ControllerClient.observe`), so a call forwarded to a paused leader stops
waiting once another is elected. Retriable failures are retried until the deadline.
"""
from __future__ import annotations

import time
from collections.abc import Callable
# Python 3.10's Future.result raises its own TimeoutError, not the builtin one (merged in 3.11)
from concurrent.futures import TimeoutError as FutureTimeoutError

from broker.controller.operations import operation
from broker.errors import KafkaTimeoutError, NetworkError, NotControllerError, RiverlogError
from broker.server.controller_runtime import ControllerRuntime
from broker.server.peers import Peers


class ControllerClient:
    """Send an operation to the active controller, wherever it is."""

    def __init__(self, node_id: int, voters: dict[int, tuple[str, int]], runtime: ControllerRuntime | None,
                 peers: Peers):
        self.node_id = node_id
        self.voters = voters
        self.runtime = runtime
        self.peers = peers
        self.leader_hint: int | None = None
        self._view: tuple[int, int | None] = (-1, None)   # (term, leader) newest heard, without a runtime

    def call(self, method: str, body: dict, timeout: float = 10.0) -> dict:
        deadline = time.monotonic() + timeout
        last: RiverlogError = NotControllerError("no active controller yet")
        while time.monotonic() < deadline:
            if self.runtime is not None and self.runtime.is_active:
                try:
                    return self.runtime.submit(operation(method, body)).result(max(0.1, deadline - time.monotonic()))
                except NotControllerError as e:
                    last = e
                except (TimeoutError, FutureTimeoutError):
                    raise KafkaTimeoutError(f"the controller did not commit {method} in time") from None
                continue
            for node in self._candidates():
                if node == self.node_id and self.runtime is not None:
                    continue
                host, port = self.voters[node]
                try:
                    reply = self.peers.call_while(f"{host}:{port}", "controller", {"method": method, "body": body},
                                                  max(0.1, deadline - time.monotonic()), self._leading(node))
                    self.leader_hint = node
                    return reply
                except (NotControllerError, NetworkError, KafkaTimeoutError) as e:
                    last = e
                    if not self._leading(node)():
                        break  # a new leader: ask it (or this node's runtime) first
            time.sleep(0.05)
        raise last if last.retriable else KafkaTimeoutError(str(last))

    def observe(self, term: int, leader: int | None) -> None:
        """A controller's view of the quorum, heard with a metadata fetch: how a broker without a
        Raft of its own learns of an election. The newest term wins, as in Raft."""
        if term > self._view[0] or (term == self._view[0] and leader is not None):
            self._view = (term, leader)
            if leader is not None:
                self.leader_hint = leader

    def _leading(self, node: int) -> Callable[[], bool]:
        """Whether ``node`` may still be the active controller, as far as this node knows (its own
        Raft, or the newest view heard from the quorum): a forwarded call stops waiting on a paused
        leader once another is elected."""
        if self.runtime is None:
            return lambda: self._view[1] in (None, node)
        return lambda: self.runtime.leader_id in (None, node)

    def _candidates(self) -> list[int]:
        hint = self.runtime.leader_id if self.runtime is not None else self.leader_hint
        others = [v for v in sorted(self.voters) if v != hint]
        return ([hint] if hint in self.voters else []) + others
