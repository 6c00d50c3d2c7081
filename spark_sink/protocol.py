"""The exactly-once commit protocol of the sink, as pure decisions (no I/O, no Spark).

Every task attempt writes into its own open transaction, named by :func:`transactional_id`. The
driver decides which attempts make up a micro-batch, records that :class:`Decision` durably, and
only then commits them; every other open attempt of the batch is aborted. Because the decision is
recorded before any transaction ends, a driver that dies mid-commit leaves enough behind for the
replay of the same batch id to finish exactly the decided transactions and write nothing new.

Only the latest decision of a sink matters: Spark replays at most the last batch of a checkpoint,
so the log keeps one record per sink id (a compacted topic) and batch ids only grow.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from broker.errors import InvalidConfigError

WRITE, SKIP = "write", "skip"


def transactional_id(sink_id: str, batch_id: int, partition_id: int, attempt: int) -> str:
    """One id per task attempt: a retried or speculative attempt never shares a producer."""
    return f"{batch_prefix(sink_id, batch_id)}{partition_id}-{attempt}"


def batch_prefix(sink_id: str, batch_id: int) -> str:
    """Every attempt of one batch, and no other batch's ("s-1-" is not a prefix of "s-10-0-0")."""
    return f"{sink_id}-{batch_id}-"


@dataclass(frozen=True)
class Attempt:
    """An attempt's open transaction: enough for the driver to end it with the producer gone."""
    transactional_id: str
    producer_id: int
    producer_epoch: int


@dataclass
class Decision:
    """The attempts whose transactions make up ``batch_id`` of ``sink_id``, decided to commit."""
    sink_id: str
    batch_id: int
    attempts: list[Attempt] = field(default_factory=list)

    def key(self) -> bytes:
        return decision_key(self.sink_id)

    def to_value(self) -> bytes:
        return json.dumps({"sink_id": self.sink_id, "batch_id": self.batch_id,
                           "attempts": [asdict(a) for a in self.attempts]},
                          sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_value(cls, raw: bytes) -> "Decision":
        v = json.loads(raw)
        return cls(v["sink_id"], v["batch_id"], [Attempt(**a) for a in v["attempts"]])

    def transactional_ids(self) -> set[str]:
        return {a.transactional_id for a in self.attempts}


def decision_key(sink_id: str) -> bytes:
    return sink_id.encode()


class SinkReusedError(InvalidConfigError):
    """A sink id that already committed a later batch: a new checkpoint with an old ``sinkId``."""


def write_action(decision: Decision | None, batch_id: int) -> str:
    """What a task of ``batch_id`` does: WRITE, or SKIP when the batch is already decided (a replay
    after the driver died between deciding and finishing the commit)."""
    if decision is None or decision.batch_id < batch_id:
        return WRITE
    if decision.batch_id == batch_id:
        return SKIP
    raise SinkReusedError(
        f"sink '{decision.sink_id}' already committed batch {decision.batch_id}, later than batch {batch_id}: "
        "a sinkId belongs to one checkpoint; give a new checkpoint a new sinkId (or none)",
        config="sinkId")


def decide(recorded: Decision | None, sink_id: str, batch_id: int, attempts: list[Attempt]) -> tuple[Decision, bool]:
    """The decision to carry out for ``batch_id`` and whether it still has to be recorded.

    A decision already recorded for this batch wins over the attempts reported now: it is what an
    earlier driver may have started committing, and the replay's tasks wrote nothing.
    """
    if recorded is not None and recorded.batch_id == batch_id:
        return recorded, False
    write_action(recorded, batch_id)  # a later recorded batch is refused here too
    return Decision(sink_id, batch_id, sorted(attempts, key=lambda a: a.transactional_id)), True


def to_abort(open_ids: list[str], sink_id: str, batch_id: int, decision: Decision | None) -> list[str]:
    """Open transactions of the batch's attempts that are not part of its decision: failed,
    killed, speculative or earlier-run attempts. Their records must never become visible."""
    prefix = batch_prefix(sink_id, batch_id)
    keep = decision.transactional_ids() if decision is not None and decision.batch_id == batch_id else set()
    return sorted(t for t in open_ids if t.startswith(prefix) and t not in keep)
