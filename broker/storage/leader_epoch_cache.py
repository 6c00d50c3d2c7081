"""A partition's leader-epoch cache: which leader epoch wrote which range of offsets.

Each entry ``(epoch, start_offset)`` says "the first batch written under leader ``epoch`` has base
offset ``start_offset``"; the epoch's range ends where the next entry starts (or at the log end).
Followers ask the leader for the end offset of their latest epoch (OffsetsForLeaderEpoch, KIP-101
and KIP-279) and truncate any tail the leader does not have, instead of trusting the high watermark.

File ``<log dir>/leader-epoch-checkpoint`` (Kafka's checkpoint text format, UTF-8, ``\\n`` endings)::

    0                 <- format version
    3                 <- number of entries
    0 0               <- "epoch start_offset", epochs and start offsets strictly increasing
    2 150
    5 320

Writing and crashes: every change is computed first, written whole (temp file, fsync, rename,
fsync the directory, via :mod:`broker.storage.checkpoint`) and only then applied in memory, so the
file always holds a complete old or new list. The owner assigns an epoch *before* appending the
batch that starts it, so after a crash the file may name epochs whose start lies at or past the
recovered log end (the unflushed tail was lost): the owner must call
``truncate_from_end(log_end_offset)`` and ``truncate_from_start(log_start_offset)`` after
recovery, and ``truncate_from_end(offset)`` after every truncation of the log, even one that
removes nothing (an epoch assigned at the log end by a leader that never wrote must go, as in
Kafka's ``truncateTo``). A missing file means an empty cache; the owner rebuilds it by calling
``assign(batch.leader_epoch, batch.base_offset)`` for every batch it scans. A file that does not
parse raises :class:`~broker.errors.KafkaStorageError`: it can only come from a damaged disk.

Threading: not thread-safe; the owning partition holds its lock around every call.

    cache = LeaderEpochCache.load(log_dir)
    cache.assign(7, log.log_end_offset)          # on becoming leader for epoch 7
    cache.end_offset_for(5, log.log_end_offset)  # answers a follower's OffsetsForLeaderEpoch
"""
from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Iterable
from typing import NamedTuple

from broker.errors import KafkaStorageError
from broker.storage.checkpoint import write_atomically

log = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
FORMAT_VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """Ordered ``(epoch, start_offset)`` entries, persisted when ``directory`` is given.

    With ``directory=None`` the cache lives in memory only (tests, simulations).
    """

    def __init__(self, directory: str | None = None, entries: Iterable[tuple[int, int]] = ()):
        self.directory = directory
        self._entries: list[EpochEntry] = [EpochEntry(int(e), int(o)) for e, o in entries]
        _check_monotonic(self._entries, "entries")
        # Right after load, the owner's truncate_from_end(log end) is kept in memory: every open
        # repeats it, so the file may keep naming epochs at or past the log end until the next
        # change or assign writes the list (before any batch lands there). A restart then costs
        # one checkpoint write per partition, not two.
        self._just_loaded = False
        self._unwritten = False

    # ------------------------------------------------------------------------------- loading
    @classmethod
    def load(cls, directory: str) -> "LeaderEpochCache":
        """The cache persisted in ``directory`` (empty when there is no checkpoint yet)."""
        path = os.path.join(directory, LEADER_EPOCH_CHECKPOINT_FILE)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except FileNotFoundError:
            return cls(directory)
        cache = cls(directory, _parse(text, path))
        cache._just_loaded = True
        return cache

    @property
    def path(self) -> str | None:
        return None if self.directory is None else os.path.join(self.directory, LEADER_EPOCH_CHECKPOINT_FILE)

    # ------------------------------------------------------------------------------- queries
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"LeaderEpochCache({[tuple(e) for e in self._entries]})"

    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch that wrote ``offset``: the entry with the largest start offset <= it."""
        i = bisect.bisect_right([e.start_offset for e in self._entries], offset)
        return self._entries[i - 1].epoch if i else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """OffsetsForLeaderEpoch: ``(largest epoch <= requested, first offset after that epoch)``.

        - ``requested_epoch`` is the latest epoch: ``(requested_epoch, log_end_offset)``.
        - otherwise the floor epoch and the start offset of the next higher epoch;
        - below the first known epoch (older epochs were deleted with the log's head):
          ``(requested_epoch, start offset of the first epoch)``, as Kafka: everything the
          follower holds from such an epoch is before anything the leader can still serve;
        - undefined, or above every known epoch, or an empty cache: ``(-1, -1)``.
        """
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._entries[-1].epoch:
            return requested_epoch, log_end_offset
        epochs = [e.epoch for e in self._entries]
        higher = bisect.bisect_right(epochs, requested_epoch)
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._entries[0].start_offset
        return self._entries[higher - 1].epoch, self._entries[higher].start_offset

    # ------------------------------------------------------------------------------- changes
    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that the batch at ``start_offset`` was written in ``epoch``; True when changed.

        Called for every batch appended, so an epoch already started at or before the offset is a
        no-op. Entries the log now contradicts are dropped first: those starting at or after
        ``start_offset`` (the log ends here) and those of a newer epoch (epochs only grow along
        the log). Usually that is one *empty* epoch (a replica that led epoch 7 at offset 100
        without writing, then follows a leader whose offset 100 came from epoch 6); more means
        the log was truncated without telling the cache, and is logged. Unlike Kafka, an earlier
        entry of the same epoch is kept: Kafka would move its start up to ``start_offset`` and
        leave the offsets in between with no epoch.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"leader epoch {epoch} and start offset {start_offset} must be >= 0")
        latest = self.latest_entry()
        if latest is not None and epoch == latest.epoch and start_offset >= latest.start_offset:
            return self._write_deferred()
        kept = [e for e in self._entries if e.start_offset < start_offset and e.epoch <= epoch]
        dropped = self._entries[len(kept):]
        if not kept or kept[-1].epoch != epoch:
            kept.append(EpochEntry(epoch, start_offset))
        if kept == self._entries:
            return self._write_deferred()
        if len(dropped) > 1 or (dropped and dropped[0].start_offset != start_offset):
            log.warning("leader epoch %d at offset %d contradicts entries %s; dropping them",
                        epoch, start_offset, dropped)
        self._replace(kept)
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """After the log was cut at ``end_offset``: drop the epochs that start at or after it."""
        kept = [e for e in self._entries if e.start_offset < end_offset]
        if len(kept) == len(self._entries):
            return self._write_deferred()
        if self._just_loaded:
            self._just_loaded, self._unwritten = False, True
            self._entries = kept
            return True
        self._replace(kept)
        return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """After the log start moved to ``start_offset``: drop epochs that end before it.

        The epoch that holds ``start_offset`` is kept with its start moved up to it, so
        ``epoch_for_offset`` still answers for every offset the log can serve.
        """
        i = bisect.bisect_right([e.start_offset for e in self._entries], start_offset)
        if i == 0:
            return self._write_deferred()
        holder = self._entries[i - 1]
        kept = [EpochEntry(holder.epoch, start_offset)] + self._entries[i:]
        if kept == self._entries:
            return self._write_deferred()
        self._replace(kept)
        return True

    def clear(self) -> None:
        """Forget every epoch (the log was deleted or fully truncated)."""
        if self._entries or self._unwritten:
            self._replace([])

    def _write_deferred(self) -> bool:
        """Write the truncation kept in memory since load, if any; False (no change now)."""
        self._just_loaded = False
        if self._unwritten:
            self._replace(self._entries)
        return False

    def _replace(self, entries: list[EpochEntry]) -> None:
        _check_monotonic(entries, "new entries")
        self._just_loaded = False
        if self.directory is not None:
            write_atomically(self.path, _format(entries))
        self._entries = entries
        self._unwritten = False


def _format(entries: list[EpochEntry]) -> bytes:
    lines = [str(FORMAT_VERSION), str(len(entries))] + [f"{e.epoch} {e.start_offset}" for e in entries]
    return ("\n".join(lines) + "\n").encode("utf-8")


def _parse(text: str, path: str) -> list[EpochEntry]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    try:
        version, count = int(lines[0]), int(lines[1])
    except (IndexError, ValueError):
        raise KafkaStorageError(f"leader epoch checkpoint {path} has no version and count lines; "
                                "the disk holding it is damaged") from None
    if version != FORMAT_VERSION:
        raise KafkaStorageError(f"leader epoch checkpoint {path} has version {version}; "
                                f"only {FORMAT_VERSION} is known")
    if len(lines) - 2 != count:
        raise KafkaStorageError(f"leader epoch checkpoint {path} declares {count} entries "
                                f"but holds {len(lines) - 2}")
    entries = []
    for n, line in enumerate(lines[2:], start=3):
        parts = line.split()
        try:
            if len(parts) != 2:
                raise ValueError
            entries.append(EpochEntry(int(parts[0]), int(parts[1])))
        except ValueError:
            raise KafkaStorageError(f"leader epoch checkpoint {path} line {n} is {line!r}; "
                                    "expected 'epoch start_offset'") from None
    try:
        _check_monotonic(entries, f"leader epoch checkpoint {path}")
    except ValueError as e:
        raise KafkaStorageError(str(e)) from None
    return entries


def _check_monotonic(entries: list[EpochEntry], what: str) -> None:
    for prev, cur in zip(entries, entries[1:]):
        if cur.epoch <= prev.epoch or cur.start_offset <= prev.start_offset:
            raise ValueError(f"{what}: epochs and start offsets must both increase, "
                             f"got {tuple(prev)} then {tuple(cur)}")
    for e in entries:
        if e.epoch < 0 or e.start_offset < 0:
            raise ValueError(f"{what}: negative epoch or offset in {tuple(e)}")
