"""Offset arithmetic of the source, pure: rate limits, splitting ranges into tasks, the JSON form.

Offsets are ``{(topic, partition): offset}`` here and ``{"topic": {"partition": offset}}`` in Spark's
checkpoint (the Kafka source's format).
"""
from __future__ import annotations

import math
from typing import NamedTuple

TP = tuple[str, int]


class Slice(NamedTuple):
    """One Spark task's share: offsets [start, until) of one partition."""
    topic: str
    partition: int
    start: int
    until: int


def to_json(offsets: dict[TP, int]) -> dict:
    out: dict = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def from_json(doc: dict) -> dict[TP, int]:
    return {(topic, int(p)): int(o) for topic, parts in doc.items() for p, o in parts.items()}


def available(start: dict[TP, int], end: dict[TP, int]) -> int:
    return sum(max(0, end[tp] - start.get(tp, end[tp])) for tp in end)


def rate_limit(start: dict[TP, int], latest: dict[TP, int], max_rows: int,
               unlimited: frozenset[str] = frozenset()) -> dict[TP, int]:
    """At most ``max_rows`` offsets past ``start``, shared in proportion to each partition's backlog
    (as Spark's Kafka source does); every partition with a backlog moves by at least one. Partitions
    of the ``unlimited`` topics (``unlimitedTopics``) are read to ``latest`` outside the budget."""
    limited = {tp: off for tp, off in latest.items() if tp[0] not in unlimited}
    backlog = {tp: max(0, limited[tp] - start.get(tp, limited[tp])) for tp in limited}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(latest)
    end = {tp: off for tp, off in latest.items() if tp[0] in unlimited}
    for tp, off in limited.items():
        begin = start.get(tp, off)
        share = math.floor(max_rows * backlog[tp] / total) if backlog[tp] else 0
        end[tp] = begin + min(backlog[tp], max(share, 1 if backlog[tp] else 0))
    return end


def align_to_time(start: dict[TP, int], end: dict[TP, int], first_at_or_after: dict[TP, int | None],
                  pivot: TP) -> dict[TP, int]:
    """A rate-limited cut moved back to one timestamp ``T`` (``alignByTimestamp``): ``pivot`` is the
    partition whose first unread record is the oldest of those the budget cut (``T`` is its
    timestamp) and keeps its cut; every other partition of ``first_at_or_after`` (the first offset
    with a timestamp at or after ``T``, None if none) stops before that offset. For partitions in
    timestamp order the batch is then a prefix of their records merged by timestamp, the order a
    Kafka Streams task applies its partitions in; the pivot always moves, so nothing stalls."""
    out = dict(end)
    for tp, first in first_at_or_after.items():
        if tp != pivot and first is not None:
            out[tp] = max(start.get(tp, end[tp]), min(end[tp], first))
    return out


def slices(start: dict[TP, int], end: dict[TP, int], min_partitions: int | None = None,
           max_records: int | None = None) -> list[Slice]:
    """One slice per partition with something to read, as Spark's Kafka source plans: with
    ``max_records`` (``maxRecordsPerPartition``) ranges are cut so none holds more; then, with
    ``min_partitions``, big ranges are cut again until there are at least that many."""
    ranges = [(tp, start.get(tp, end[tp]), end[tp]) for tp in sorted(end) if end[tp] > start.get(tp, end[tp])]
    if max_records:
        ranges = [piece for tp, s, u in ranges for piece in _cut(tp, s, u, math.ceil((u - s) / max_records))]
    total = sum(u - s for _, s, u in ranges)
    if min_partitions and len(ranges) < min_partitions and total:
        ranges = [piece for tp, s, u in ranges
                  for piece in _cut(tp, s, u, max(1, round(min_partitions * (u - s) / total)))]
    return [Slice(tp[0], tp[1], s, u) for tp, s, u in ranges]


def _cut(tp: TP, start: int, until: int, parts: int) -> list[tuple[TP, int, int]]:
    step = math.ceil((until - start) / parts)
    return [(tp, a, min(until, a + step)) for a in range(start, until, step)]
