"""What a follower decides on its own: where to cut its log when it starts following a leader, and
which high watermark it may expose.

Truncation follows KIP-101 and KIP-279 (OffsetsForLeaderEpoch), never the high watermark alone
(that loses acknowledged data or leaves replicas diverged after quick successive failures):

1. Ask the leader for the end offset of the follower's latest epoch ``E``. The leader answers
   ``(L, end)``: ``L`` is its largest epoch <= ``E`` and ``end`` where ``L`` ended in its log.
2. If the follower knows ``L`` too, everything it holds past the end of ``L`` on *either* side is
   divergent or missing from the leader: cut at ``min(own end of L, end, own LEO)``. Done.
3. If the follower does not know ``L`` (its epochs skip it), everything it wrote in epochs above
   its own floor of ``L`` is unknown to the leader: cut at the end of that floor epoch and ask
   again with the floor epoch, which is now the latest. Each round drops at least one epoch.
4. An answer without an end offset (the leader knows no epoch that old), or a follower without any
   epochs, falls back to Kafka's pre-KIP-101 rule: cut at the follower's high watermark.

    step = truncation_step(cache, log.log_end_offset, leader_answer, high_watermark=hw)
    log.truncate_to(step.offset)
    cache.truncate_from_end(step.offset)   # always, even when no record goes (see below)
    if not step.complete: ...ask again for cache.latest_epoch()...

The caller must cut its epoch cache at the offset even when the log already ends there, as
Kafka's ``truncateTo`` does: a replica that led an epoch without writing holds an entry starting
at its log end, and if it stays, the next round asks about that same epoch forever.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple, Union

from broker.storage.leader_epoch_cache import (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, EpochEntry,
                                               LeaderEpochCache)

EpochAnswer = tuple[int, int]
EpochsLike = Union[LeaderEpochCache, Iterable[tuple[int, int]]]


class TruncationStep(NamedTuple):
    offset: int      # cut the log here: offsets >= it go
    complete: bool   # False: cut, then ask the leader about the (new) latest local epoch again


def truncation_step(local_epochs: EpochsLike, local_leo: int, leader_answer: EpochAnswer,
                    high_watermark: int | None = None) -> TruncationStep:
    """One round of OffsetsForLeaderEpoch: ``leader_answer`` is the leader's ``(epoch, end_offset)``
    for the follower's latest epoch. ``high_watermark`` is needed only for the fallback (rule 4)."""
    entries = _entries(local_epochs)
    leader_epoch, leader_end = leader_answer
    if not entries or leader_end == UNDEFINED_EPOCH_OFFSET:
        return TruncationStep(_fallback(local_leo, high_watermark), True)
    if leader_epoch == UNDEFINED_EPOCH:
        return TruncationStep(min(leader_end, local_leo), True)
    own_epoch, own_end = LeaderEpochCache(None, entries).end_offset_for(leader_epoch, local_leo)
    if own_end == UNDEFINED_EPOCH_OFFSET:
        # The leader answered with an epoch above all of ours: it cannot have less than we hold
        # from our own epochs, so only its end offset limits us.
        return TruncationStep(min(leader_end, local_leo), True)
    if own_epoch != leader_epoch:
        return TruncationStep(min(own_end, local_leo), False)
    return TruncationStep(min(own_end, leader_end, local_leo), True)


def truncation_offset(local_epochs: EpochsLike, local_leo: int,
                      leader_answer: Union[EpochAnswer, Callable[[int], EpochAnswer]],
                      high_watermark: int | None = None) -> int:
    """Where the follower's log must be cut before it fetches from the leader.

    ``leader_answer`` is either the leader's ``(epoch, end_offset)`` for the follower's latest
    epoch, giving this round's offset (see :func:`truncation_step` for whether another round is
    needed), or a function ``epoch -> (epoch, end_offset)`` asking the leader, which is called
    round after round until the offset is final. Neither ``local_epochs`` nor anything else is
    changed: the caller truncates its log and cache afterwards.
    """
    if not callable(leader_answer):
        return truncation_step(local_epochs, local_leo, leader_answer, high_watermark).offset
    entries = _entries(local_epochs)
    leo = local_leo
    for _ in range(len(entries) + 1):
        if not entries:
            return _fallback(leo, high_watermark)
        step = truncation_step(entries, leo, leader_answer(entries[-1].epoch), high_watermark)
        leo = min(leo, step.offset)
        if step.complete:
            return leo
        entries = [e for e in entries if e.start_offset < leo]
    raise AssertionError("truncation did not converge; each round must drop an epoch")


def follower_high_watermark(leader_high_watermark: int, local_log_end_offset: int,
                            log_start_offset: int = 0) -> int:
    """The HW a follower adopts from a fetch response: the leader's, but never past its own log end
    (nor before its log start)."""
    return max(log_start_offset, min(leader_high_watermark, local_log_end_offset))


def _entries(local_epochs: EpochsLike) -> list[EpochEntry]:
    if isinstance(local_epochs, LeaderEpochCache):
        return local_epochs.entries()
    return [EpochEntry(int(e), int(o)) for e, o in local_epochs]


def _fallback(local_leo: int, high_watermark: int | None) -> int:
    if high_watermark is None:
        raise ValueError("without local leader epochs (or a leader that knows none as old) the log "
                         "is cut at the high watermark: pass high_watermark")
    return min(local_leo, high_watermark)
