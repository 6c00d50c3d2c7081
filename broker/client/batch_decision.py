"""What an exactly-once committer decides, as pure functions: which transactions make up a batch
(a :class:`Decision`), what a task of a batch does (:data:`WRITE` or :data:`SKIP`), and which open
transactions of a batch to abort. The transactional ids of a batch's attempts are named here, so
that a batch's attempts are found again by their prefix.

No I/O: :class:`~broker.client.decision_log.DecisionLog` records decisions (in the format its module
documents) and :class:`~broker.client.exactly_once.ExactlyOnce` carries them out.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field

from broker.client.message import TopicPartition
from broker.client.txn_admin import TransactionHandle
from broker.errors import InvalidConfigError

WRITE, SKIP = "write", "skip"
OFFSETS_ATTEMPT = "offsets"  # the committer's own attempt of a batch, after the batch's prefix
_ATTEMPT_TAIL = re.compile(rf"\d+-\d+|{OFFSETS_ATTEMPT}")  # "{task}-{attempt}" or the offsets attempt


# ------------------------------------------------------------------------------ pure decisions
def transactional_id(owner: str, batch_id: int, task: int, attempt: int) -> str:
    """One id per task attempt: a retried or speculative attempt never shares a producer."""
    return f"{batch_prefix(owner, batch_id)}{task}-{attempt}"


def offsets_transactional_id(owner: str, batch_id: int) -> str:
    """The committer's offsets attempt of a batch: one per batch, so a committer that restarts
    before recording fences (and aborts) its predecessor's by ``init_transactions``."""
    return f"{batch_prefix(owner, batch_id)}{OFFSETS_ATTEMPT}"


def batch_prefix(owner: str, batch_id: int) -> str:
    """The start of every attempt's id in one batch ("s-1-" does not start "s-10-0-0")."""
    return f"{owner}-{batch_id}-"


def in_batch(txn_id: str, owner: str, batch_id: int) -> bool:
    """Whether ``txn_id`` is an attempt of this batch of this owner, and not merely starts like one:
    owner "a", batch 1 has prefix "a-1-", which also starts owner "a-1"'s batch 2 ("a-1-2-0-0",
    "a-1-2-offsets"). The tail after the prefix is a task's "{task}-{attempt}" or "offsets"."""
    prefix = batch_prefix(owner, batch_id)
    return txn_id.startswith(prefix) and _ATTEMPT_TAIL.fullmatch(txn_id[len(prefix):]) is not None


@dataclass
class Decision:
    """The attempts whose transactions make up ``batch_id`` of ``owner``, decided to commit."""
    owner: str
    batch_id: int
    attempts: list[TransactionHandle] = field(default_factory=list)

    def key(self) -> bytes:
        return decision_key(self.owner)

    def to_value(self) -> bytes:
        return json.dumps({"sink_id": self.owner, "batch_id": self.batch_id,
                           "attempts": [asdict(a) for a in self.attempts]},
                          sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def from_value(cls, raw: bytes) -> "Decision":
        v = json.loads(raw)
        return cls(v["sink_id"], v["batch_id"], [TransactionHandle(**a) for a in v["attempts"]])

    def transactional_ids(self) -> set[str]:
        return {a.transactional_id for a in self.attempts}


def decision_key(owner: str) -> bytes:
    return owner.encode()


class OwnerReusedError(InvalidConfigError):
    """An owner asked about a batch older than one it already decided: a new run (a new
    checkpoint) that reuses an old owner id. ``details``: owner, batch_id, decided_batch_id."""


def write_action(decision: Decision | None, batch_id: int) -> str:
    """What a task of ``batch_id`` does, given its owner's latest decision: WRITE, or SKIP when the
    batch is already decided (a replay after the committer died between deciding and ending)."""
    if decision is None or decision.batch_id < batch_id:
        return WRITE
    if decision.batch_id == batch_id:
        return SKIP
    raise OwnerReusedError(
        f"'{decision.owner}' already committed batch {decision.batch_id}, later than batch {batch_id}: an "
        "owner id belongs to one sequence of batches; give a new run a new owner id",
        config="owner", owner=decision.owner, batch_id=batch_id, decided_batch_id=decision.batch_id)


def decide(recorded: Decision | None, owner: str, batch_id: int,
           attempts: list[TransactionHandle]) -> tuple[Decision, bool]:
    """The decision to carry out for ``batch_id`` and whether it still has to be recorded.

    A decision already recorded for this batch wins over the attempts reported now: it is what an
    earlier committer may have started carrying out, and the replay's tasks wrote nothing.
    """
    if recorded is not None and recorded.batch_id == batch_id:
        return recorded, False
    write_action(recorded, batch_id)  # a later recorded batch is refused here too
    return Decision(owner, batch_id, sorted(attempts, key=lambda a: a.transactional_id)), True


def group_offsets(group_id: str | None, offsets) -> list[TopicPartition] | None:
    """The offsets a batch commits for ``group_id`` (None: none), checked: both or neither given,
    a non-empty group, each partition once with a next offset to read of at least 0. Sorted, so
    the offsets attempt sends them in one order."""
    if offsets is None and group_id is None:
        return None
    if offsets is None or not group_id:
        raise InvalidConfigError("offsets and group_id go together: the offsets of which consumer group?"
                                 if offsets is not None else "group_id needs offsets (and must not be empty)",
                                 config="group_id" if offsets is not None else "offsets")
    seen: set[tuple[str, int]] = set()
    for tp in offsets:
        if tp.offset < 0 or tp.partition < 0 or (tp.topic, tp.partition) in seen:
            raise InvalidConfigError(
                f"offset {tp.offset} of {tp.topic} [{tp.partition}] for group '{group_id}': each partition once, with "
                "the next offset to read (0 or more)", config="offsets")
        seen.add((tp.topic, tp.partition))
    return sorted(offsets)


def on_abort(recorded: Decision | None, batch_id: int,
             attempts: list[TransactionHandle]) -> tuple[Decision | None, list[TransactionHandle]]:
    """A failed batch: the decision that still stands (one recorded for this very batch, which its
    replay will commit, so it is never aborted) and the reported attempts to abort (all others)."""
    decision = recorded if recorded is not None and recorded.batch_id == batch_id else None
    keep = decision.transactional_ids() if decision is not None else set()
    return decision, [a for a in attempts if a.transactional_id not in keep]


def attempt_batch(txn_id: str, owner: str) -> int | None:
    """The batch of ``txn_id`` when it names an attempt of ``owner`` (a task's, or the offsets
    attempt), else None. Unambiguous between owners that start alike: "a-1-2-0" is owner "a"'s
    batch 1, and owner "a-1"'s ids have one dash more ("a-1-2-0-0")."""
    m = re.fullmatch(rf"{re.escape(owner)}-(\d+)-(?:\d+-\d+|{OFFSETS_ATTEMPT})", txn_id)
    return int(m.group(1)) if m else None


def strays(open_ids: Iterable[str], owner: str, batch_id: int, keep: set[str]) -> list[str]:
    """The open transactions to abort when ``batch_id`` ends: ``owner``'s attempts of this batch or
    an earlier one, outside ``keep`` (the ids of a decision, which must commit). An earlier batch's
    open attempt cannot be one it decided: a batch runs only once the one before it has ended, so
    it is one nobody reported in time (failed, killed, speculative or an earlier run's). Later
    batches are left alone (live attempts of a batch not yet ended, e.g. a Streams generation's),
    and so are other owners' ids. Their records must never become visible."""
    return sorted(t for t in open_ids
                  if t not in keep and (b := attempt_batch(t, owner)) is not None and b <= batch_id)
