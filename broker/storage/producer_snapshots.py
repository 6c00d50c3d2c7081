"""Older producer-state snapshots, for a log cut below its newest one (Kafka keeps one snapshot per
segment and ``ProducerStateManager.truncateAndReload`` loads the latest at or below the offset).

The current snapshot (``producer-state.json``) is usually taken at the log end: at a clean shutdown
or after a clean. A follower truncation after a restart, or the recovery of a torn tail, then cuts
below it; rebuilding from the log start instead replays segments the cleaner rewrote, which keep
only each producer's last batch *of the clean*, so a producer whose later batches were cut off
comes back with an earlier sequence missing (a transactional producer's resend is refused
``OutOfOrderSequence``) or not at all. So each snapshot the current one replaces is kept as
``producer-state-<offset>.json`` (the newest :data:`KEPT` of them), and before the state is loaded
for a log cut to ``end`` the newest one at or below ``end`` becomes current, without the aborted
ranges a clean has forgotten since (their records, and possibly their markers, are gone).
"""
from __future__ import annotations

import json
import os
import re
import shutil

from broker.storage.checkpoint import write_atomically

KEPT = 16
_NAME = re.compile(r"^producer-state-(\d{20})\.json$")


def history_path(directory: str, offset: int) -> str:
    return os.path.join(directory, f"producer-state-{offset:020d}.json")


def _history(directory: str) -> dict[int, str]:
    """Offset -> path of every kept older snapshot."""
    out = {}
    for name in os.listdir(directory):
        match = _NAME.match(name)
        if match:
            out[int(match.group(1))] = os.path.join(directory, name)
    return out


_OFFSET = re.compile(rb'^\{"offset": (\d+)')


def snapshot_offset(path: str) -> int | None:
    """The offset the snapshot at ``path`` is valid up to (None: no readable snapshot). Its JSON
    starts with the offset, so a large snapshot is not read whole."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            match = _OFFSET.match(head)
            if match:
                return int(match.group(1))
            return int(json.loads(head + f.read())["offset"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def keep_history(directory: str, path: str, new_offset: int) -> None:
    """Before ``path`` is replaced by a snapshot at ``new_offset``: keep the current one when it is
    older, drop kept ones at or past ``new_offset`` (a log cut below them) and all but the newest
    :data:`KEPT`."""
    offset = snapshot_offset(path)
    if offset is not None and offset < new_offset:
        target = history_path(directory, offset)
        if os.path.exists(target):
            os.unlink(target)
        try:
            os.link(path, target)   # made durable by the directory fsync of the write that follows
        except OSError:
            shutil.copyfile(path, target)
    kept = _history(directory)
    for offset in sorted(kept, reverse=True):
        if offset >= new_offset or sum(1 for o in kept if new_offset > o > offset) >= KEPT:
            os.unlink(kept[offset])


def clear_history(directory: str) -> None:
    for path in _history(directory).values():
        os.unlink(path)


def restore_snapshot(directory: str, path: str, end_offset: int, cleaned_to: int, log_start: int) -> None:
    """The log now ends at ``end_offset``: if the current snapshot is past it, make the newest kept
    one at or below it current, dropping the aborted ranges whose marker lies below ``cleaned_to``
    (the cleaner checkpoint: a clean forgot them); without one, remove it, so the owner rebuilds the
    state from the log (left, it would be loaded once the log grew past its offset again, with
    producers of records that are gone; Kafka's ``truncateAndReload`` deletes such snapshots).
    Kept ones past ``end_offset`` go, and none below ``log_start`` is made current: the batches
    between it and the log start are gone, so their producers would come back with old sequences."""
    kept = _history(directory)
    current = snapshot_offset(path)
    older = [o for o in kept if log_start <= o <= end_offset]
    if current is not None and current > end_offset:
        if older:
            with open(kept[max(older)], "rb") as f:
                doc = json.loads(f.read())
            doc["aborted"] = [a for a in doc.get("aborted", []) if a[2] >= cleaned_to]
            write_atomically(path, json.dumps(doc).encode())
            os.unlink(kept.pop(max(older)))
        else:
            os.unlink(path)
    for offset, name in kept.items():
        if offset > end_offset:
            os.unlink(name)
