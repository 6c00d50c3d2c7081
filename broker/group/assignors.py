"""Partition assignors: which member of a group consumes which partition.

Run by the coordinator (broker-side assignment, as in Kafka's new consumer protocol), pure and
deterministic: the same members, subscriptions and partition counts give the same answer.

``range`` and ``roundrobin`` are *eager*: when the assignment changes, every member gives up
everything before the new assignment is handed out (Kafka's classic behaviour for these names).
``cooperative-sticky`` is *cooperative*: partitions stay with their owner where balance allows,
and only the ones that move are revoked, so the rest keep being consumed during a rebalance.
"""
from __future__ import annotations

from collections.abc import Mapping

from broker.errors import UnsupportedAssignorError

TP = tuple[str, int]
Assignment = dict[str, set[TP]]


def range_assign(members: Mapping[str, list[str]], partitions: Mapping[str, int],
                 previous: Assignment | None = None) -> Assignment:
    """Per topic, contiguous ranges of partitions in member order; earlier members get one more."""
    out: Assignment = {m: set() for m in members}
    for topic in sorted(partitions):
        subscribers = sorted(m for m, topics in members.items() if topic in topics)
        if not subscribers:
            continue
        count = partitions[topic]
        size, extra = divmod(count, len(subscribers))
        start = 0
        for i, member in enumerate(subscribers):
            n = size + (1 if i < extra else 0)
            out[member].update((topic, p) for p in range(start, start + n))
            start += n
    return out


def roundrobin_assign(members: Mapping[str, list[str]], partitions: Mapping[str, int],
                      previous: Assignment | None = None) -> Assignment:
    """Every partition in (topic, partition) order dealt to the subscribed members in turn."""
    out: Assignment = {m: set() for m in members}
    order = sorted(members)
    if not order:
        return out
    turn = 0
    for topic in sorted(partitions):
        for p in range(partitions[topic]):
            for _ in range(len(order)):
                member = order[turn % len(order)]
                turn += 1
                if topic in members[member]:
                    out[member].add((topic, p))
                    break
    return out


def cooperative_sticky_assign(members: Mapping[str, list[str]], partitions: Mapping[str, int],
                              previous: Assignment | None = None) -> Assignment:
    """Balanced like round-robin, but a partition stays with its previous owner whenever that
    owner is still subscribed and within its fair share, so a rebalance moves as little as it can."""
    previous = previous or {}
    out: Assignment = {m: set() for m in members}
    every = [(t, p) for t in sorted(partitions) for p in range(partitions[t])]
    eligible = {tp: [m for m in sorted(members) if tp[0] in members[m]] for tp in every}
    wanted = [tp for tp in every if eligible[tp]]
    active = [m for m in sorted(members) if any(t in partitions for t in members[m])]
    if not active:
        return out
    base, extra = divmod(len(wanted), len(active))
    ceiling = base + (1 if extra else 0)
    owner_of = {tp: m for m, owned in sorted(previous.items()) for tp in owned}
    for tp in wanted:  # stick, up to the ceiling
        m = owner_of.get(tp)
        if m in out and tp[0] in members[m] and len(out[m]) < ceiling:
            out[m].add(tp)
    # Only ``extra`` members may hold the ceiling; the others give back one (their last) partition.
    full = [m for m in active if len(out[m]) == ceiling and ceiling > base]
    for m in full[extra:]:
        out[m].discard(max(out[m]))
    taken = {tp for owned in out.values() for tp in owned}
    for tp in wanted:
        if tp in taken:
            continue
        at_ceiling = sum(1 for m in active if len(out[m]) > base)
        candidates = [m for m in eligible[tp] if len(out[m]) < base or (len(out[m]) == base and at_ceiling < extra)]
        pool = candidates or eligible[tp]
        chosen = min(pool, key=lambda m: (len(out[m]), m))
        out[chosen].add(tp)
    return out


ASSIGNORS = {
    "range": range_assign,
    "roundrobin": roundrobin_assign,
    "cooperative-sticky": cooperative_sticky_assign,
}
COOPERATIVE = {"cooperative-sticky"}


def assignor(name: str):
    """The assignor for a ``partition.assignment.strategy`` value (its first entry, Kafka-style lists)."""
    first = name.split(",")[0].strip().lower()
    if first not in ASSIGNORS:
        raise UnsupportedAssignorError(
            f"unknown partition.assignment.strategy {name!r}; use one of {', '.join(sorted(ASSIGNORS))}")
    return first, ASSIGNORS[first]
