"""Handlers of the internal service: what other nodes ask of this one. Plain calls, no gRPC.

- ``raft``: a Raft message for this node's controller runtime (answered at once; replies travel
  as separate messages).
- ``controller``: an operation for the active controller (NotController elsewhere).
- ``fetch_metadata``: committed metadata records after an offset, long-polled; a broker without
  the controller role follows the metadata log this way.
- ``offset_for_leader_epoch``: where a leader epoch ends on this leader (a returning follower
  truncates its log there).
"""
from __future__ import annotations

from broker.controller.operations import operation
from broker.errors import InvalidRequestError, NotControllerError, RiverlogError


class InternalHandlers:
    def __init__(self, broker):
        self.broker = broker

    def call(self, method: str, body: dict) -> dict:
        handler = getattr(self, f"_{method}", None)
        if handler is None:
            raise InvalidRequestError(f"unknown internal method {method!r}")
        return handler(body)

    def _runtime(self):
        runtime = self.broker.runtime
        if runtime is None:
            raise NotControllerError(f"node {self.broker.node_id} is not a controller")
        return runtime

    def _raft(self, body: dict) -> dict:
        self._runtime().deliver(body["src"], body["message"])
        return {}

    def _controller(self, body: dict) -> dict:
        runtime = self._runtime()
        if not runtime.is_active:
            raise NotControllerError(f"node {self.broker.node_id} is not the active controller "
                                     f"(leader: {runtime.leader_id})")
        future = runtime.submit(operation(body["method"], body["body"]))
        return future.result(30)

    def _fetch_metadata(self, body: dict) -> dict:
        runtime = self._runtime()
        offset = body["offset"]
        runtime.wait_past(offset, body.get("max_wait_ms", 0) / 1000.0)
        applied, entries, snapshot = runtime.records_since(offset)
        return {"applied": applied, "entries": entries, "snapshot": snapshot}

    def _offset_for_leader_epoch(self, body: dict) -> dict:
        out = []
        for ask in body["partitions"]:
            try:
                partition = self.broker.partition(ask["topic"], ask["partition"])
                partition.check_leader(ask.get("current_leader_epoch", -1))
                epoch, end = partition.end_offset_for_epoch(ask["leader_epoch"])
                out.append({"leader_epoch": epoch, "end_offset": end})
            except RiverlogError as e:
                out.append({"error_code": e.code, "error_message": e.message})
        return {"partitions": out}
