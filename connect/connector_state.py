"""What a connector's query keeps outside Spark, and how a restarted one finds it: the
checkpoint directory and its ``sinkId``, the consumer group of a sink connector, the end offset a
batch recorded, and the transactions a killed query left open."""
from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import uuid
from typing import Any

from broker.errors import CoordinatorNotAvailableError, RiverlogError
from spark_sink import offset_log

log = logging.getLogger(__name__)


def group_id(name: str) -> str:
    """Kafka's ``SinkUtils.consumerGroupId``."""
    return f"connect-{name}"


class ConnectorPaths:
    """Where a connector keeps its Spark checkpoint and the sinkId that goes with it.

    Kafka keys everything of a connector by its exact name, so the directory is one-to-one with
    it: a readable part (the name with every character but ``[\\w.-]`` as ``_``, cut short) then
    ``-`` and a hash of the exact name (``x y`` and ``x_y`` get two directories, so two checkpoints
    and two sinkIds). The exact name is kept in the directory's ``name`` file.

    A directory of the older naming (the readable part alone, no ``name`` file) cannot be told
    apart between the names that map to it, so a worker does not reuse it: at start it ends the
    transactions that directory's sinkId left open (:meth:`end_pending`) and removes it. The broker
    holds the truth — a sink's committed group offsets, a source's connect-offsets, both written in
    the batch's transaction — and a new checkpoint starts from them; the checkpoint is only the
    fast path (the batch in flight replayed under the same sinkId)."""

    _READABLE = 64

    def __init__(self, state_dir: str, worker_group: str, name: str):
        self.name: str | None = name
        self.root = os.path.join(self.group_dir(state_dir, worker_group), self.directory(name))
        self._set_files()

    @classmethod
    def existing(cls, state_dir: str, worker_group: str) -> list["ConnectorPaths"]:
        """Every connector directory under the worker group's, of either naming; ``name`` is None
        for the older naming (see the class docstring)."""
        group = cls.group_dir(state_dir, worker_group)
        out = []
        for entry in sorted(os.listdir(group)) if os.path.isdir(group) else []:
            paths = cls.__new__(cls)
            paths.root = os.path.join(group, entry)
            paths._set_files()
            paths.name = paths._stored_name()
            if paths.name is not None and cls.directory(paths.name) != entry:
                paths.name = None
            out.append(paths)
        return out

    def _set_files(self) -> None:
        self.checkpoint = os.path.join(self.root, "checkpoint")
        self._name_file = os.path.join(self.root, "name")
        self._sink_id_file = os.path.join(self.root, "sink-id")
        self._start_file = os.path.join(self.root, "query-start")

    @staticmethod
    def safe(name: str) -> str:
        return re.sub(r"[^\w.-]", "_", name)

    @classmethod
    def group_dir(cls, state_dir: str, worker_group: str) -> str:
        return os.path.join(state_dir, cls.safe(worker_group))

    @classmethod
    def directory(cls, name: str) -> str:
        """The directory name of connector ``name``: readable, and distinct for distinct names."""
        digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:16]
        return f"{cls.safe(name)[:cls._READABLE]}-{digest}"

    def _stored_name(self) -> str | None:
        try:
            with open(self._name_file, encoding="utf-8") as f:
                return f.read()
        except (FileNotFoundError, UnicodeDecodeError):
            return None

    def _write(self, path: str, text: str) -> None:
        os.makedirs(self.root, exist_ok=True)
        if self.name is not None and not os.path.exists(self._name_file) and path != self._name_file:
            self._write(self._name_file, self.name)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)

    def fresh(self) -> bool:
        offsets = os.path.join(self.checkpoint, "offsets")
        return not (os.path.isdir(offsets) and os.listdir(offsets))

    def previous(self) -> tuple[str, str] | None:
        """(sinkId, the cluster it wrote to) of the last query, if this worker ran one."""
        try:
            with open(self._sink_id_file) as f:
                sink_id, _, servers = f.read().strip().partition("\n")
        except FileNotFoundError:
            return None
        return sink_id, servers

    def sink_id(self, name: str, servers: str) -> str:
        """The current checkpoint's sinkId; a new one when the checkpoint is new or lost. It holds
        the directory name, so two connectors never share one (nor their transactional ids)."""
        previous = self.previous()
        if not self.fresh() and previous is not None:
            return previous[0]
        sink_id = f"connect-{self.directory(name)}-{uuid.uuid4().hex[:12]}"
        self._write(self._sink_id_file, f"{sink_id}\n{servers}")
        return sink_id

    def query_start(self, compute) -> Any:
        """Where the current checkpoint's query started (``compute()``, Spark's ``startingOffsets``
        for it), kept beside the checkpoint: Spark's offset log holds each batch's end, so the
        start of batch 0 — asked for again when batch 0 is replayed, after the group may have
        moved — is read back from here while the checkpoint lives."""
        if not self.fresh():
            try:
                with open(self._start_file) as f:
                    return json.load(f)
            except (FileNotFoundError, ValueError):
                pass  # a checkpoint from before this file: the group's offsets are the best guess
        start = compute()
        self._write(self._start_file, json.dumps(start))
        return start

    def end_pending(self, servers: str) -> None:
        """:func:`finish_pending` for the last query's sinkId and its dead letter queue's: what it
        left open must end before its sinkId is forgotten (:meth:`discard`), or nothing would ever
        end it before ``transaction.timeout.ms`` (every ``read_committed`` reader of the topics it
        wrote, connect-offsets included, waits until then). ``servers``: where it wrote when the
        sink-id file does not say."""
        previous = self.previous()
        if previous is not None:
            for owner in (previous[0], previous[0] + "-dlq"):
                finish_pending(previous[1] or servers, owner)

    def discard(self) -> None:
        """Forget the checkpoint (offsets were altered, or the connector deleted); call
        :meth:`end_pending` first."""
        import shutil
        shutil.rmtree(self.root, ignore_errors=True)


def finish_pending(servers: str, owner: str) -> None:
    """End what a killed query of ``owner`` left open: commit a batch it decided, abort every other
    open attempt. Its open transactions would otherwise hold every ``read_committed`` reader of its
    outputs and of connect-offsets (the worker's own start included) until
    ``transaction.timeout.ms``. A replay with the checkpoint then skips the decided batch and
    rewrites the aborted one; a new query without the checkpoint starts after the decided one."""
    from broker.client.exactly_once import ONGOING, ExactlyOnce
    pattern = re.compile(rf"{re.escape(owner)}-\d+-(\d+-\d+|offsets)")
    with ExactlyOnce({"bootstrap.servers": servers}, owner) as eo:
        decision = eo.log.latest(owner)
        keep = set()
        if decision is not None:
            eo.commit(decision.batch_id, decision.attempts, record=False)
            keep = decision.transactional_ids()
        try:
            listing = eo.admin.list_transactions(eo.timeout, states=[ONGOING], prefix=owner + "-",
                                                 retry_loading=True).result()   # a start: nothing waits
        except CoordinatorNotAvailableError as e:
            log.warning("open transactions of '%s' not listed, so none aborted (read_committed readers of its "
                        "outputs may wait up to transaction.timeout.ms for them): %s", owner, e)
            return
        for t in listing:
            if t.state == ONGOING and pattern.fullmatch(t.transactional_id) and t.transactional_id not in keep:
                try:
                    eo.admin.abort_transaction(t.transactional_id, eo.timeout).result()
                except RiverlogError:
                    pass  # ended meanwhile


def batch_end_offset(checkpoint: str, batch_id: int) -> Any:
    """The first source's end offset of ``batch_id`` from Spark's offset log (written before the
    batch runs, so it is there inside ``foreachBatch``)."""
    return offset_log.source_offsets(checkpoint, batch_id)[0]


def held_partitions(start: dict[tuple[str, int], int], end: dict) -> tuple[tuple[str, int], ...]:
    """The (topic, partition)s a batch may hold records of, sorted: those whose range from ``start``
    to ``end`` (Spark's offset-log shape) is not empty, and those whose start is not known (below
    zero or missing: looked up later, and retention may have moved it since Spark read from it)."""
    return tuple(sorted((t, int(p)) for t, ps in end.items() for p, o in ps.items()
                        if start.get((t, int(p)), -1) < 0 or start[(t, int(p))] < int(o)))


def batch_start_offset(checkpoint: str, batch_id: int, query_start: Any) -> dict[tuple[str, int], int]:
    """Where ``batch_id`` starts, per (topic, partition): the previous batch's end from Spark's
    offset log, or where the query started for its first batch. Offsets below zero (earliest) are
    left to the caller."""
    start = query_start
    if batch_id > 0:
        try:
            start = batch_end_offset(checkpoint, batch_id - 1)
        except FileNotFoundError:
            pass  # the query's first batch after a restart at a later id: the group's offsets
    if not isinstance(start, dict):
        return {}
    return {(t, int(p)): int(o) for t, ps in start.items() if isinstance(ps, dict) for p, o in ps.items()}
