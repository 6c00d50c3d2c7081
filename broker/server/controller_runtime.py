"""A controller node's runtime: the Raft node, its thread, its peers, and the active controller.

One thread (``riverlog-controller``) owns the :class:`RaftNode`, the metadata image the committed
log builds, and the :class:`QuorumController`. Everything reaches it through a queue: Raft
messages from peers, operations from request handlers (create a topic, a broker heartbeat, an ISR
change), and ticks. Operations run one at a time and only on the active controller; an operation's
records are proposed to Raft and its caller is answered once they are committed and applied, and
the next operation waits until then, so a decision is never built on records that may be lost.

Metadata log entries are JSON ``{"records": [...]}``; an empty entry is Raft's no-op. Each record is
applied with the entry's index as its offset (a broker's epoch is the offset of its registration).
"""
from __future__ import annotations

import json
import logging
import os
import queue
import random
import threading
from concurrent.futures import Future

from broker.clock import Clock
from broker.config import Config
from broker.controller.quorum_controller import QuorumController
from broker.errors import NotControllerError, RiverlogError
from broker.metadata.image import MetadataImage
from broker.raft import FileRaftStorage, RaftNode
from broker.raft import messages as raft_messages

log = logging.getLogger(__name__)

METADATA_DIR = "__cluster_metadata-0"
TICK_S = 0.02
RETAINED_ENTRIES = 20_000


def parse_voters(value: str) -> dict[int, tuple[str, int]]:
    """``1@host:9093,2@host:9095`` as {1: (host, 9093), ...}."""
    voters = {}
    for part in filter(None, (p.strip() for p in value.split(","))):
        node, _, address = part.partition("@")
        host, _, port = address.rpartition(":")
        if not node.isdigit() or not port.isdigit():
            raise ValueError(f"controller.quorum.voters entry {part!r} is not id@host:port")
        voters[int(node)] = (host or "127.0.0.1", int(port))
    return voters


def _complete(result, offset: int):
    """An operation's answer once its records are committed at ``offset``."""
    if callable(result):
        return result(offset)
    if isinstance(result, dict):
        result.setdefault("offset", offset)
    return result


class _Op:
    """One operation of the active controller; once proposed, its records sit at (``term``,
    ``index``) of the log. Only an entry with that index *and* term completes it: the same index
    written by a later leader means the records were truncated away."""
    __slots__ = ("fn", "future", "index", "term", "result")

    def __init__(self, fn):
        self.fn = fn
        self.future: Future = Future()
        self.index = -1
        self.term = -1
        self.result = None


class ControllerRuntime:
    def __init__(self, config: Config, clock: Clock, voters: list[int], send):
        """``send(dst, message_dict)`` delivers a Raft message to a peer (best effort, non-blocking)."""
        self.config = config
        self.clock = clock
        self.node_id = config["node.id"]
        self.voters = voters
        self._send = send
        directory = os.path.join(config["log.dirs"], METADATA_DIR)
        os.makedirs(directory, exist_ok=True)
        self.storage = FileRaftStorage(directory)
        base = config["controller.quorum.election.timeout.ms"]
        self.raft = RaftNode(self.node_id, voters, self.storage, random.Random(), clock.time_ms(),
                             election_timeout_ms=(base, 2 * base), heartbeat_ms=max(10, base // 10))
        self.controller = QuorumController(config, voters=list(voters))
        self.image = MetadataImage()
        self.applied = -1
        self.snapshot_index = -1
        self._since_snapshot = 0
        self.history: list[tuple[int, list[dict]]] = []  # applied (offset, records) after history_base
        self.history_base = -1
        self.changed = threading.Condition()  # guards image/history for readers; notified on apply
        self._inbox: queue.SimpleQueue = queue.SimpleQueue()
        self._ops: list[_Op] = []
        self._pending: _Op | None = None
        self._before_upkeep = 0   # queued operations that run before the upkeep's next turn
        self._queued_heartbeats: dict[int, tuple[int, int]] = {}   # node -> (broker epoch, arrival)
        self._load_snapshot(self.storage.snapshot())
        self._active = False
        self._active_term = -1
        self._ready_index = -1
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="riverlog-controller", daemon=True)

    def start(self) -> "ControllerRuntime":
        self._thread.start()
        return self

    def stop(self) -> None:
        """Resign Raft leadership (the followers elect a successor at once, as Kafka's controller
        does on graceful shutdown), then stop the thread."""
        self._inbox.put(("resign",))
        self._inbox.put(None)  # ends the loop once the resignation is sent
        if self._thread.is_alive():
            self._thread.join(5)
        self._stopped.set()
        self.storage.close() if hasattr(self.storage, "close") else None

    # ------------------------------------------------------------------------------ inputs
    def deliver(self, src: int, message: dict) -> None:
        self._inbox.put(("raft", src, message))

    def submit(self, fn) -> Future:
        """Run ``fn(controller, image, now_ms) -> (records, result)`` on the active controller."""
        op = _Op(fn)
        self._inbox.put(("op", op))
        return op.future

    @property
    def leader_id(self) -> int | None:
        leader = self.raft.leader_id
        return None if leader is None or leader < 0 else leader

    @property
    def leader_view(self) -> tuple[int, int | None]:
        """This node's Raft term and the leader it knows in it, for a broker without a Raft of its
        own (sent with each metadata fetch it serves)."""
        return self.raft.term, self.leader_id

    @property
    def is_active(self) -> bool:
        return self._active

    # ------------------------------------------------------------------------------ the loop
    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                item = self._inbox.get(timeout=TICK_S)
            except queue.Empty:
                item = False
            if item is None:
                return
            try:
                now = self.clock.time_ms()
                if item:
                    self._handle(item, now)
                while True:  # drain whatever else is waiting before ticking
                    try:
                        item = self._inbox.get_nowait()
                    except queue.Empty:
                        break
                    if item is None:
                        return
                    self._handle(item, now)
                self._emit(self.raft.tick(now))
                self._apply_committed()
                self._maybe_run_ops(now)
            except Exception:  # noqa: BLE001 - the controller thread must survive; logged
                log.exception("controller loop step failed")

    def _handle(self, item, now: int) -> None:
        if item[0] == "raft":
            _, src, message = item
            self._emit(self.raft.step(src, raft_messages.from_dict(message), now))
        elif item[0] == "resign":
            self._emit(self.raft.resign(now))
        else:
            self._ops.append(item[1])
            beat = getattr(item[1].fn, "heartbeat", None)
            if beat is not None:
                self._queued_heartbeats[beat[0]] = (beat[1], now)

    def _emit(self, envelopes) -> None:
        for env in envelopes:
            if env.dst == self.node_id:
                self._inbox.put(("raft", env.src, raft_messages.to_dict(env.message)))
            else:
                self._send(env.dst, raft_messages.to_dict(env.message))

    # ------------------------------------------------------------------------------ applying
    def _apply_committed(self) -> None:
        snap = self.raft.take_snapshot_to_apply()
        if snap is not None:
            self._load_snapshot(snap)
        entries = self.raft.take_committed()
        if not entries and snap is None:
            self._check_leadership()
            return
        with self.changed:
            for entry in entries:
                if entry.index > self.applied:
                    self._apply_entry(entry)
            if len(self.history) > RETAINED_ENTRIES:
                cut = len(self.history) - RETAINED_ENTRIES
                self.history_base = self.history[cut - 1][0]
                del self.history[:cut]
            self.changed.notify_all()
        self._maybe_snapshot()
        self._check_leadership()

    def _apply_entry(self, entry) -> None:
        records = json.loads(entry.data)["records"] if entry.data else []
        for record in records:
            self.image.apply(record, entry.index)
        self.image.offset = entry.index
        self.applied = entry.index
        if records:
            self.history.append((entry.index, records))
            self._since_snapshot += len(records)
        pending = self._pending
        if pending is not None and entry.index >= pending.index:
            self._pending = None
            if pending.future.done():
                return
            if entry.index == pending.index and entry.term == pending.term:
                pending.future.set_result(_complete(pending.result, pending.index))
            else:
                # another leader's entry took its place (Kafka's renounce() fails the deposed
                # controller's pending writes before the new leader's records are applied)
                pending.future.set_exception(NotControllerError(
                    "leadership was lost before this operation was committed; retry it on the active controller",
                    leader_id=self.leader_id))

    def _load_snapshot(self, snap) -> None:
        if snap is None:
            return
        index, _term, data = snap
        image = MetadataImage()
        for record in json.loads(data)["records"]:
            image.apply(record, index)
        image.offset = index
        with self.changed:
            self.image, self.applied, self.snapshot_index = image, index, index
            self.history, self.history_base = [], index
        pending = self._pending
        if pending is not None and pending.index <= index:
            # a leader's snapshot covers it: whether this node's records are in it is unknown
            self._pending = None
            if not pending.future.done():
                pending.future.set_exception(NotControllerError(
                    "leadership was lost before this operation was known to be committed; check and retry it "
                    "on the active controller", leader_id=self.leader_id))

    def _maybe_snapshot(self) -> None:
        if self._since_snapshot < self.config["metadata.max.snapshot.records"]:
            return
        data = json.dumps({"records": self.image.to_records()}).encode()
        self.raft.compact(self.applied, data)
        self.snapshot_index = self.applied
        self._since_snapshot = 0

    def _check_leadership(self) -> None:
        # Leading in a later term than the one we activated in means leadership was lost and won
        # back between two checks: another leader may have committed records we have not applied.
        leader = self.raft.role == "leader" and (not self._active or self.raft.term == self._active_term)
        if leader and not self._active and self._ready_index < 0:
            self._ready_index = self.raft.last_index  # our no-op: once applied, the image is current
        if leader and not self._active and self.applied >= self._ready_index >= 0:
            self._active, self._active_term = True, self.raft.term
            self.controller.activate(self.image, self.clock.time_ms())
            log.info("node %d is the active controller (term %d)", self.node_id, self.raft.term)
        if not leader:
            if self._active:
                log.info("node %d is no longer the active controller", self.node_id)
            self._active, self._ready_index = False, -1
            self._fail_ops()
            if self.raft.role == "leader":  # re-won: wait for this term's no-op before acting again
                self._check_leadership()

    def _fail_ops(self) -> None:
        error = NotControllerError("this node is not the active controller", leader_id=self.leader_id)
        for op in ([self._pending] if self._pending else []) + self._ops:
            if not op.future.done():
                op.future.set_exception(error)
        self._pending, self._ops = None, []
        self._before_upkeep, self._queued_heartbeats = 0, {}

    # ------------------------------------------------------------------------------ operations
    def _maybe_run_ops(self, now: int) -> None:
        """Operations and upkeep take turns in arrival order, as Kafka's controller queues its
        periodic checks among the requests: the upkeep runs once the operations queued before its
        turn are done, and operations queued since wait for it. So a steady stream of requests
        never holds back fencing a silent broker (and moving its leaderships). Heartbeats still
        queued count as heard (:meth:`QuorumController.touch`), so a backlog fences no live broker."""
        if not self._active:
            if self._ops and self.raft.role != "leader":
                self._fail_ops()
            return
        while self._pending is None:
            if self._before_upkeep <= 0 or not self._ops:
                self._upkeep(now)
                self._before_upkeep = len(self._ops)
                if self._pending is not None or not self._ops:
                    return
            self._before_upkeep -= 1
            self._start(self._ops.pop(0), now)

    def _upkeep(self, now: int) -> None:
        for node, (epoch, arrived) in self._queued_heartbeats.items():
            self.controller.touch(self.image, node, epoch, arrived)
        self._queued_heartbeats = {}
        records = self.controller.reconcile(self.image, now)
        if records:
            self._propose(_Op(None), records, None, now)

    def _start(self, op: _Op, now: int) -> None:
        try:
            records, result = op.fn(self.controller, self.image, now)
        except RiverlogError as e:
            op.future.set_exception(e)
            return
        except Exception as e:  # noqa: BLE001 - a bug in one operation must not stop the controller
            log.exception("controller operation failed")
            op.future.set_exception(e)
            return
        if not records:
            op.future.set_result(_complete(result, self.applied))
            return
        self._propose(op, records, result, now)

    def _propose(self, op: _Op, records: list[dict], result, now: int) -> None:
        op.result = result
        try:
            op.index, envelopes = self.raft.propose(json.dumps({"records": records}).encode(), now)
            op.term = self.raft.term
        except Exception as e:  # noqa: BLE001 - lost leadership between the check and the proposal
            op.future.set_exception(NotControllerError(str(e), leader_id=self.leader_id))
            return
        self._pending = op
        self._emit(envelopes)

    # ------------------------------------------------------------------------------ followers of the log
    def records_since(self, offset: int) -> tuple[int, list[tuple[int, list[dict]]], list[dict] | None]:
        """What a broker at metadata ``offset`` needs: (applied offset, entries after it, or a snapshot
        of the whole image when it is too far behind)."""
        with self.changed:
            applied = self.applied
            if offset >= applied:
                return applied, [], None
            if offset < self.history_base:
                return applied, [], self.image.to_records()
            return applied, [(i, r) for i, r in self.history if i > offset], None

    def wait_past(self, offset: int, timeout: float) -> None:
        with self.changed:
            if self.applied <= offset:
                self.changed.wait(timeout)
