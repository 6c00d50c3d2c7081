"""Handlers of the internal service: what other nodes ask of this one. Plain calls, no gRPC.

Dispatch is an explicit table per listener, and every body is checked against its method's fields
before anything runs, so a malformed or unknown call gets a typed ``InvalidRequest`` and can never
reach an attribute that is not a handler.

On the controller listener (``CONTROLLER_METHODS``):
- ``raft``: a Raft message for this node's controller runtime (answered at once; replies travel
  as separate messages). The message is decoded here, so a malformed one never reaches Raft.
- ``controller``: an operation for the active controller (NotController elsewhere).
- ``fetch_metadata``: committed metadata records after an offset, long-polled; a broker without
  the controller role follows the metadata log this way.

On the inter-broker listener (``BROKER_METHODS``):
- ``offset_for_leader_epoch``: where a leader epoch ends on this leader (a returning follower
  truncates its log there).
"""
from __future__ import annotations

from broker.controller.operations import operation
from broker.errors import InvalidRequestError, NotControllerError, RiverlogError
from broker.raft import messages as raft_messages

# method -> {field: (type, required)}
_FIELDS: dict[str, dict[str, tuple[type | tuple, bool]]] = {
    "raft": {"src": (int, True), "message": (dict, True)},
    "controller": {"method": (str, True), "body": (dict, True)},
    "fetch_metadata": {"offset": (int, True), "max_wait_ms": (int, False)},
    "offset_for_leader_epoch": {"partitions": (list, True)},
}
_PARTITION_FIELDS = {"topic": (str, True), "partition": (int, True), "leader_epoch": (int, True),
                     "current_leader_epoch": (int, False)}
CONTROLLER_METHODS = ("raft", "controller", "fetch_metadata")
BROKER_METHODS = ("offset_for_leader_epoch",)


def _check(what: str, body, fields: dict) -> None:
    if not isinstance(body, dict):
        raise InvalidRequestError(f"{what}: the body must be a JSON object, not {type(body).__name__}")
    for name, (kind, required) in fields.items():
        if name not in body:
            if required:
                raise InvalidRequestError(f"{what}: the body lacks field '{name}'")
            continue
        value = body[name]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise InvalidRequestError(f"{what}: field '{name}' must be {getattr(kind, '__name__', kind)}, "
                                      f"not {type(value).__name__}")


class InternalHandlers:
    """The internal calls one listener serves: ``methods`` names them (a subset of the table)."""

    def __init__(self, broker, methods: tuple[str, ...]):
        self.broker = broker
        table = {"raft": self._raft, "controller": self._controller, "fetch_metadata": self._fetch_metadata,
                 "offset_for_leader_epoch": self._offset_for_leader_epoch}
        self._handlers = {name: table[name] for name in methods}

    def call(self, method: str, body) -> dict:
        handler = self._handlers.get(method)
        if handler is None:
            raise InvalidRequestError(f"unknown internal method {method!r} on this listener; "
                                      f"it serves {sorted(self._handlers)}")
        _check(f"internal {method}", body, _FIELDS[method])
        return handler(body)

    def _runtime(self):
        runtime = self.broker.runtime
        if runtime is None:
            raise NotControllerError(f"node {self.broker.node_id} is not a controller")
        return runtime

    def _raft(self, body: dict) -> dict:
        runtime = self._runtime()
        if body["src"] not in self.broker.voters:
            raise InvalidRequestError(f"node {body['src']} is not a voter of this quorum")
        try:
            raft_messages.from_dict(body["message"])
        except (ValueError, TypeError, KeyError) as e:
            raise InvalidRequestError(f"malformed Raft message: {e}") from None
        runtime.deliver(body["src"], body["message"])
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
        runtime.wait_past(offset, min(max(0, body.get("max_wait_ms", 0)), 30_000) / 1000.0)
        applied, entries, snapshot = runtime.records_since(offset)
        term, leader = runtime.leader_view
        return {"applied": applied, "entries": entries, "snapshot": snapshot, "term": term, "leader": leader}

    def _offset_for_leader_epoch(self, body: dict) -> dict:
        out = []
        for ask in body["partitions"]:
            try:
                _check("internal offset_for_leader_epoch partition", ask, _PARTITION_FIELDS)
                partition = self.broker.partition(ask["topic"], ask["partition"])
                partition.check_leader(ask.get("current_leader_epoch", -1))
                epoch, end = partition.end_offset_for_epoch(ask["leader_epoch"])
                out.append({"leader_epoch": epoch, "end_offset": end})
            except RiverlogError as e:
                out.append({"error_code": e.code, "error_message": e.message})
        return {"partitions": out}
