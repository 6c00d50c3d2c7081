"""What a connector's query keeps outside Spark, and how a restarted one finds it: the
checkpoint directory and its ``sinkId``, the consumer group of a sink connector, the end offset a
batch recorded, and the transactions a killed query left open."""
from __future__ import annotations

import json
import os
import re
import uuid
from typing import Any

from broker.errors import RiverlogError
from spark_sink import offset_log


def group_id(name: str) -> str:
    """Kafka's ``SinkUtils.consumerGroupId``."""
    return f"connect-{name}"


class ConnectorPaths:
    """Where a connector keeps its Spark checkpoint and the sinkId that goes with it."""

    def __init__(self, state_dir: str, worker_group: str, name: str, safe: bool = False):
        self.root = os.path.join(state_dir, self.safe(worker_group), name if safe else self.safe(name))
        self.checkpoint = os.path.join(self.root, "checkpoint")
        self._sink_id_file = os.path.join(self.root, "sink-id")
        self._start_file = os.path.join(self.root, "query-start")

    @staticmethod
    def safe(name: str) -> str:
        return re.sub(r"[^\w.-]", "_", name)

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
        """The current checkpoint's sinkId; a new one when the checkpoint is new or lost."""
        previous = self.previous()
        if not self.fresh() and previous is not None:
            return previous[0]
        os.makedirs(self.root, exist_ok=True)
        sink_id = f"connect-{re.sub(r'[^A-Za-z0-9._-]', '_', name)}-{uuid.uuid4().hex[:12]}"
        tmp = self._sink_id_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{sink_id}\n{servers}")
        os.replace(tmp, self._sink_id_file)
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
        os.makedirs(self.root, exist_ok=True)
        tmp = self._start_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(start, f)
        os.replace(tmp, self._start_file)
        return start

    def discard(self) -> None:
        """Forget the checkpoint (offsets were altered, or the connector deleted)."""
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
        listing = eo.admin.list_transactions(eo.timeout, states=[ONGOING], prefix=owner + "-").result()
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
