"""Partition leader election, as Kafka's controller does it (pure functions over broker ids).

- A leader is the first replica, in assignment order, that is both in the ISR and alive. Every ISR
  member holds every offset below the high watermark, so any of them can lead without losing
  acknowledged data; assignment order keeps leadership on the preferred replica when it can.
- ``unclean.leader.election.enable`` trades that guarantee for availability: when no ISR member is
  alive, any live replica may lead (and whatever it lacks is lost).
- A broker that dies leaves the ISR, except the last member: Kafka keeps it so the partition stays
  offline until that broker returns, rather than letting an out-of-sync replica lead silently.

    elect_leader([3, 1, 2], isr=[1, 2], live_brokers={1, 2, 3})   # -> 1
    isr_after_broker_loss([1, 2], 1)                              # -> [2]
    isr_after_broker_loss([2], 2)                                 # -> [2]
"""
from __future__ import annotations

from collections.abc import Collection, Sequence


def elect_leader(replicas: Sequence[int], isr: Collection[int], live_brokers: Collection[int],
                 unclean: bool = False) -> int | None:
    """The first live ISR member in assignment order; with ``unclean``, else the first live replica."""
    for r in replicas:
        if r in isr and r in live_brokers:
            return r
    if unclean:
        for r in replicas:
            if r in live_brokers:
                return r
    return None


def preferred_leader(replicas: Sequence[int]) -> int | None:
    """The first replica of the assignment (None for an empty assignment)."""
    return replicas[0] if replicas else None


def isr_after_broker_loss(isr: Sequence[int], broker: int) -> list[int]:
    """The ISR once ``broker`` is gone; never empty: the last member is kept."""
    remaining = [r for r in isr if r != broker]
    return remaining if remaining else list(isr)
