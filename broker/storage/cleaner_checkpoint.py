"""Where compaction stopped in a log, kept in its own small file so a restart resumes there.

Layout of ``<topic>-<partition>/cleaner-offset-checkpoint``: one ASCII line
``<first dirty offset> <delete horizon ms>\\n``, written atomically (``broker.storage.checkpoint``).
A missing or unreadable file means nothing was cleaned yet.
"""
from __future__ import annotations

import os
from typing import NamedTuple

from broker.storage.checkpoint import write_atomically

CLEANER_CHECKPOINT_FILE = "cleaner-offset-checkpoint"


class CleanerCheckpoint(NamedTuple):
    """Where compaction stopped: offsets below ``first_dirty_offset`` were cleaned; the earliest
    delete horizon the cleaner kept (-1 for none) says when a clean is due to drop a tombstone or
    marker (see ``broker.storage.cleaner``). The file format is unchanged."""
    first_dirty_offset: int
    delete_horizon_ms: int = -1


def write_cleaner_checkpoint(directory: str, checkpoint: CleanerCheckpoint) -> None:
    write_atomically(os.path.join(directory, CLEANER_CHECKPOINT_FILE),
                     f"{checkpoint.first_dirty_offset} {checkpoint.delete_horizon_ms}\n".encode())


def read_cleaner_checkpoint(directory: str) -> CleanerCheckpoint:
    try:
        with open(os.path.join(directory, CLEANER_CHECKPOINT_FILE), "rb") as f:
            first, oldest = (int(x) for x in f.read().split())
        return CleanerCheckpoint(first, oldest)
    except (FileNotFoundError, ValueError):
        return CleanerCheckpoint(0)
