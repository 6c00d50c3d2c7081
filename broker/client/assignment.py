"""The rules librdkafka applies to ``assign``, ``incremental_assign`` and ``incremental_unassign``.

A subscribed consumer's rebalance protocol follows its assignor: ``cooperative-sticky`` is
COOPERATIVE (each rebalance hands out and takes back only what moves, so the application changes
its assignment with ``incremental_assign``/``incremental_unassign``); ``range`` and ``roundrobin``
are EAGER (every rebalance replaces the whole assignment, with ``assign``/``unassign``). Using the
other protocol's call fails with ``_STATE``, as in confluent-kafka, because it would silently lose
or duplicate partitions: ``assign(new)`` inside a cooperative ``on_assign`` drops everything the
member already had. Without a subscription every call is allowed.

Checks are all-or-nothing and happen before anything changes, in partition order, with
librdkafka's codes: a duplicate or an invalid logical offset is ``_INVALID_ARG``, adding an
assigned partition is ``_CONFLICT``, removing one not assigned is ``_INVALID_ARG``.

    check_add({("orders", 0)}, [TopicPartition("orders", 0)])   # KafkaException(_CONFLICT)
"""
from __future__ import annotations

from collections.abc import Collection, Iterable

from broker.client.message import OFFSET_BEGINNING, OFFSET_END, OFFSET_INVALID, OFFSET_STORED, TopicPartition
from broker.errors import KafkaError, KafkaException
from broker.protocol import COOPERATIVE_ASSIGNORS

TP = tuple[str, int]
EAGER, COOPERATIVE = "EAGER", "COOPERATIVE"
_LOGICAL = {OFFSET_BEGINNING, OFFSET_END, OFFSET_STORED, OFFSET_INVALID}
_TAIL_BASE = -2000  # librdkafka's OFFSET_TAIL(n) is _TAIL_BASE - n


def rebalance_protocol(strategy: str) -> str:
    """The protocol of a ``partition.assignment.strategy``: its first entry's. The group may use
    another entry of the list (the one every member supports), but the coordinator refuses a list
    that mixes eager and cooperative assignors, so every entry has the first one's protocol."""
    first = strategy.split(",")[0].strip().lower()
    return COOPERATIVE if first in COOPERATIVE_ASSIGNORS else EAGER


def check_method(protocol: str | None, incremental: bool, failed: str = "") -> None:
    """Refuse the call that does not match the subscription's protocol (None: not subscribed).
    ``failed`` prefixes the message as confluent-kafka's ``assign``/``unassign`` do."""
    if protocol == COOPERATIVE and not incremental:
        needed = "incremental_assign() or incremental_unassign()"
    elif protocol == EAGER and incremental:
        needed = "assign()"
    else:
        return
    reason = f"Changes to the current assignment must be made using {needed} when rebalance protocol type is {protocol}"
    raise KafkaException(KafkaError(KafkaError._STATE, f"{failed}: {reason}" if failed else reason))


def _keyed(partitions: Iterable[TopicPartition]) -> list[tuple[TP, TopicPartition]]:
    return sorted((((tp.topic, tp.partition), tp) for tp in partitions), key=lambda item: item[0])


def check_add(current: Collection[TP], partitions: Iterable[TopicPartition]) -> None:
    """``partitions`` may be added to ``current`` (``assign`` checks against an empty one)."""
    previous = None
    for key, tp in _keyed(partitions):
        where = f"{tp.topic} [{tp.partition}]"
        if _TAIL_BASE < tp.offset < 0 and tp.offset not in _LOGICAL:
            raise KafkaException(KafkaError(KafkaError._INVALID_ARG, f"{where} has invalid start offset {tp.offset}"))
        if key == previous:
            raise KafkaException(KafkaError(KafkaError._INVALID_ARG, f"Duplicate {where} in input list"))
        if key in current:
            raise KafkaException(KafkaError(KafkaError._CONFLICT, f"{where} is already part of the current assignment"))
        previous = key


def check_remove(current: Collection[TP], partitions: Iterable[TopicPartition]) -> None:
    """``partitions`` may be taken out of ``current``."""
    keyed = _keyed(partitions)
    if keyed and not current:
        raise KafkaException(KafkaError(KafkaError._INVALID_ARG, "Can't subtract from empty assignment"))
    for key, tp in keyed:
        if key not in current:
            raise KafkaException(KafkaError(
                KafkaError._INVALID_ARG,
                f"{tp.topic} [{tp.partition}] can't be unassigned since it is not in the current assignment"))
