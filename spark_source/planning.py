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
    of the ``unlimited`` topics (``unlimitedTopics``) are read to ``latest`` outside the budget, and
    so is a partition with no backlog: one whose latest offset fell below ``start`` (reported as data
    loss) ends there, as Spark's ``rateLimit`` leaves it. A share is computed as Spark computes it,
    ``limit * (size / total)`` in doubles, floored: the same batch boundaries, including where the
    double falls just below a whole number (58 of 200 under a budget of 100 is 28, not 29; 15 of 22
    under a budget of exactly 22 is 14, so that batch leaves one offset for the next)."""
    limited = {tp: off for tp, off in latest.items() if tp[0] not in unlimited}
    backlog = {tp: max(0, limited[tp] - start.get(tp, limited[tp])) for tp in limited}
    total = sum(backlog.values())
    if not total:   # no shortcut when the budget covers the backlog: Spark prorates then too
        return dict(latest)
    end = {tp: off for tp, off in latest.items() if tp[0] in unlimited}
    for tp, off in limited.items():
        begin = start.get(tp, off)
        share = math.floor(max_rows * (backlog[tp] / total)) if backlog[tp] else 0
        end[tp] = begin + min(backlog[tp], max(share, 1)) if backlog[tp] else off
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
            out[tp] = min(end[tp], max(start.get(tp, end[tp]), first))   # never above the cut
    return out


def slices(start: dict[TP, int], end: dict[TP, int], min_partitions: int | None = None,
           max_records: int | None = None) -> list[Slice]:
    """One slice per partition with something to read, as Spark's Kafka source plans
    (``KafkaOffsetRangeCalculator``): with ``max_records`` (``maxRecordsPerPartition``) ranges are
    cut so none holds more; then, if there are fewer than ``min_partitions``, big ranges are cut
    again as :func:`_spread` says."""
    ranges = [(tp, start.get(tp, end[tp]), end[tp]) for tp in sorted(end) if end[tp] > start.get(tp, end[tp])]
    if max_records:
        ranges = [piece for tp, s, u in ranges for piece in _divide(tp, s, u, -(-(u - s) // max_records))]
    if min_partitions and len(ranges) < min_partitions:
        ranges = _spread(ranges, min_partitions)
    return [Slice(tp[0], tp[1], s, u) for tp, s, u in ranges]


def _spread(ranges: list[tuple[TP, int, int]], min_partitions: int) -> list[tuple[TP, int, int]]:
    """Spark's ``getRanges``: a range whose share of ``min_partitions`` (by size) rounds to one or
    less stays whole; the others share what is left of ``min_partitions`` by size. So a skewed
    batch gets about ``min_partitions`` tasks, not that many plus one per small partition."""
    total = sum(u - s for _, s, u in ranges)
    whole = [_part_count(u - s, total, min_partitions) == 1 for _, s, u in ranges]
    split_total = total - sum(u - s for (_, s, u), w in zip(ranges, whole) if w)
    split_parts = max(min_partitions - sum(whole), 1)
    return [piece for (tp, s, u), w in zip(ranges, whole)
            for piece in _divide(tp, s, u, 1 if w else _part_count(u - s, split_total, split_parts))]


def _part_count(size: int, total: int, parts: int) -> int:
    return max(math.floor(size / total * parts + 0.5), 1)   # Java's Math.round: halves round up


def _divide(tp: TP, start: int, until: int, parts: int) -> list[tuple[TP, int, int]]:
    """[start, until) in ``parts`` pieces differing by at most one record, the larger ones last
    (Spark's ``getDividedPartition``)."""
    out, remaining = [], until - start
    for part in range(parts):
        size = remaining // (parts - part)
        remaining -= size
        if size:
            out.append((tp, start, start + size))
        start += size
    return out
