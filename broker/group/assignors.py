"""Partition assignors: which member of a group consumes which partition.

Run by the coordinator (broker-side assignment, as in Kafka's new consumer protocol), pure and
deterministic: the same members, subscriptions and partition counts give the same answer.

``range`` and ``roundrobin`` are *eager*: when the assignment changes, every member gives up
everything before the new assignment is handed out (Kafka's classic behaviour for these names).
``cooperative-sticky`` is *cooperative*: partitions stay with their owner where balance allows,
and only the ones that move are revoked, so the rest keep being consumed during a rebalance.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from broker.errors import UnsupportedAssignorError
from broker.protocol import COOPERATIVE_ASSIGNORS, assignment_strategies

TP = tuple[str, int]
Assignment = dict[str, set[TP]]


def member_order(members: Iterable[str], instance_ids: Mapping[str, str] | None = None) -> list[str]:
    """Members in Kafka's ``AbstractPartitionAssignor.MemberInfo`` order: static members (by
    ``group.instance.id``) first, then dynamic ones (by member id). A static member's place so does
    not depend on the random member id it got this time, and a restart keeps its partitions."""
    instance_ids = instance_ids or {}
    return sorted(members, key=lambda m: (0, instance_ids[m], m) if instance_ids.get(m) else (1, "", m))


def range_assign(members: Mapping[str, list[str]], partitions: Mapping[str, int],
                 previous: Assignment | None = None, *, instance_ids: Mapping[str, str] | None = None) -> Assignment:
    """Per topic, contiguous ranges of partitions in member order (:func:`member_order`); earlier
    members get one more."""
    out: Assignment = {m: set() for m in members}
    order = member_order(members, instance_ids)
    for topic in sorted(partitions):
        subscribers = [m for m in order if topic in members[m]]
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
                      previous: Assignment | None = None, *,
                      instance_ids: Mapping[str, str] | None = None) -> Assignment:
    """Every partition in (topic, partition) order dealt to the subscribed members in turn, in
    member order (:func:`member_order`)."""
    out: Assignment = {m: set() for m in members}
    order = member_order(members, instance_ids)
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
                              previous: Assignment | None = None, *,
                              instance_ids: Mapping[str, str] | None = None) -> Assignment:
    """Balanced, and sticky: every partition first stays with its previous owner while that owner
    still subscribes to its topic, the others go to their emptiest subscriber, and then
    :func:`_even_out` moves one partition at a time from the fullest member to the emptiest one
    that can take it until Kafka's balance rule holds (even with different subscriptions), so a
    rebalance moves only what balance requires. ``instance_ids`` is accepted for a uniform
    signature; stickiness already keeps a static member's partitions."""
    previous = previous or {}
    out: Assignment = {m: set() for m in members}
    every = [(t, p) for t in sorted(partitions) for p in range(partitions[t])]
    eligible = {tp: [m for m in sorted(members) if tp[0] in members[m]] for tp in every}
    owner_of = {tp: m for m, owned in sorted(previous.items()) for tp in owned}
    for tp in every:  # stick: every partition stays with its previous owner while it subscribes
        m = owner_of.get(tp)
        if m in out and tp[0] in members[m]:
            out[m].add(tp)
    taken = {tp for owned in out.values() for tp in owned}
    for tp in every:  # the rest: to the emptiest subscriber
        if eligible[tp] and tp not in taken:
            out[min(eligible[tp], key=lambda m: (len(out[m]), m))].add(tp)
    _even_out(out, members, owner_of)
    return out


def _even_out(out: Assignment, members: Mapping[str, list[str]], owner_of: Mapping[TP, str]) -> None:
    """Kafka's balance rule for the sticky assignors (``AbstractStickyAssignorTest.verifyValidityAndBalance``):
    no member holds 2 or more partitions more than another member that subscribes to one of their
    topics. While such a pair exists, one partition moves from the fullest member to the emptiest
    subscriber that can take it: preferably one that member owned before, then one the giver did
    not own before (no move for the giver), then the giver's last. Each move lowers the sum of
    squared sizes, so this ends; it moves nothing when the rule already holds."""
    while True:
        move = None
        for giver in sorted(out, key=lambda m: (-len(out[m]), m)):
            takers = [m for m in out if len(out[m]) + 2 <= len(out[giver])
                      and any(t in members[m] for t, _ in out[giver])]
            if takers:
                taker = min(takers, key=lambda m: (len(out[m]), m))
                movable = [tp for tp in out[giver] if tp[0] in members[taker]]
                tp = max(movable, key=lambda tp: (owner_of.get(tp) == taker, owner_of.get(tp) != giver, tp))
                move = giver, taker, tp
                break
        if move is None:
            return
        giver, taker, tp = move
        out[giver].discard(tp)
        out[taker].add(tp)


ASSIGNORS = {
    "range": range_assign,
    "roundrobin": roundrobin_assign,
    "cooperative-sticky": cooperative_sticky_assign,
}
COOPERATIVE = set(COOPERATIVE_ASSIGNORS)


def strategies(value: str) -> list[str]:
    """A member's ``partition.assignment.strategy`` list, in its order of preference (empty:
    ``range``); one naming no assignor, or mixing eager and cooperative ones, is refused
    (:func:`broker.protocol.assignment_strategies`)."""
    names, problem = assignment_strategies(value)
    if problem is not None:
        raise UnsupportedAssignorError(problem)
    return names


def elect(preferences: Sequence[Sequence[str]], current: str = "") -> str | None:
    """The group's assignor, as Kafka's ``ClassicGroup.selectProtocol``: of the assignors every
    member supports, each member votes for the one it prefers most, and the most votes win (a tie
    keeps ``current`` if it is among them, else goes to the first by name). None when the members
    have none in common (Kafka's INCONSISTENT_GROUP_PROTOCOL)."""
    if not preferences:
        return None
    common = set(preferences[0]).intersection(*preferences[1:])
    if not common:
        return None
    votes = Counter(next(n for n in names if n in common) for names in preferences)
    most = max(votes.values())
    tied = sorted(n for n, v in votes.items() if v == most)
    return current if current in tied else tied[0]


def assignor(name: str):
    """The assignor for a ``partition.assignment.strategy`` value (its first entry, Kafka-style lists)."""
    first = name.split(",")[0].strip().lower()
    if first not in ASSIGNORS:
        raise UnsupportedAssignorError(
            f"unknown partition.assignment.strategy {name!r}; use one of {', '.join(sorted(ASSIGNORS))}")
    return first, ASSIGNORS[first]
