"""A :class:`~streams.app.StreamsApp` query's Spark checkpoint under ``state.dir``: where it is,
what Riverlog keeps in and beside it (the exactly-once owner id, a stateful query's state
partitions and task keys), and when it cannot be resumed, so the query starts from the broker.

Its own module because the checkpoint's layout and the rules for trusting it are one concept,
apart from starting the query: :mod:`streams.app` asks whether to start fresh and where.
"""
from __future__ import annotations

import json
import logging
import os
import shutil

from streams.task_placement import identity, placement_keys
from streams.topology import SubTopology

log = logging.getLogger("streams.app")  # the application's logger, as before the split

_PLACEMENT = "riverlog-streams-placement"   # beside a stateful query's checkpoint: its state partitions and keys
OWNER_FILE = "riverlog-streams-owner"       # in a query's checkpoint: its exactly-once owner id (its generation)


class QueryCheckpoints:
    """Needs ``app`` and ``config`` (from StreamsApp) and ``_superseded`` (from
    :class:`~streams.generations.Generations`)."""

    def _checkpoint(self, sub: SubTopology) -> str:
        return os.path.join(self.config["state.dir"], self.app, f"subtopology-{sub.id}")

    def _discard_unusable_checkpoint(self, sub: SubTopology) -> None:
        """Delete ``sub``'s checkpoint when the query cannot resume from it, so it starts from the
        broker: one without a finished batch (:func:`_committed_a_batch`); a stateless query's
        checkpoint for a query that is now stateful (an extractor that now reads the partition
        time: Spark cannot add a stateful operator to it, and the broker holds all it held); one of
        an older generation than the broker records (:meth:`_superseded`: the application ran from
        another ``state.dir`` since, so this checkpoint's offsets and state are behind the
        committed ones, and resuming from it would process those records again)."""
        ckpt = self._checkpoint(sub)
        owner_file = os.path.join(ckpt, OWNER_FILE)
        if not os.path.exists(owner_file):
            return
        if not _committed_a_batch(ckpt):
            why = "holds no finished batch"
        elif sub.stateful and not os.path.isdir(os.path.join(ckpt, "state")):
            why = "is a stateless query's"
        else:
            with open(owner_file) as f:
                owner = f.read().strip()
            if not self._superseded(sub, owner):
                return
            why = f"is of {owner}, an older generation than the broker records (the application ran elsewhere since)"
        log.info("sub-topology %s: its checkpoint %s %s; starting from the broker", sub.id, ckpt, why)
        shutil.rmtree(ckpt)


def _committed_a_batch(checkpoint: str) -> bool:
    """Whether Spark's commit log in ``checkpoint`` holds a batch. A query killed before its first
    batch finished is started again from the broker, not from this checkpoint: Spark would replay
    batch 0 from the source's initial offsets asked anew (this start's ``startingOffsets`` are not
    given again) and without the state restored from the changelogs (``initialState`` is only for a
    fresh start), so the replay would read the wrong records into an empty store. From the broker,
    the batch is finished if it was decided and aborted if not, and state and offsets are read back."""
    commits = os.path.join(checkpoint, "commits")
    return os.path.isdir(commits) and any(name.isdigit() for name in os.listdir(commits))


def _placement(checkpoint: str, tasks: int, fresh: bool) -> tuple[int | None, tuple[int, ...]]:
    """(state partitions, a grouping key per task) of a stateful query: for a fresh checkpoint one
    partition per task, each task's key placed in its own (:mod:`streams.task_placement`); else the
    keys kept beside the checkpoint, or, for a checkpoint made before them, the task numbers. The
    partitions of an existing checkpoint are Spark's to keep (None)."""
    if fresh:
        return max(1, tasks), placement_keys(tasks)
    path = os.path.join(checkpoint, _PLACEMENT)
    if not os.path.exists(path):
        return None, identity(tasks)
    with open(path) as f:
        kept = json.load(f)
    return None, placement_keys(tasks, kept["partitions"], kept["keys"])
