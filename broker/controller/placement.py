"""Where a new partition's replicas go: Kafka's rack-unaware ``StripedReplicaPlacer`` over the
registered brokers, or a manual assignment checked as Kafka's ``ReplicationControlManager`` does,
and the ISR a new partition starts with. Pure: the randomness is passed in."""
from __future__ import annotations

import random

from broker.errors import InvalidReplicaAssignmentError, InvalidReplicationFactorError
from broker.metadata.image import MetadataImage


def place_replicas(image: MetadataImage, rng: random.Random, count: int, factor: int,
                   first: int = 0) -> list[list[int]]:
    """Kafka's rack-unaware spread over the available brokers: a random start, leaders
    round-robin, followers shifted. As Kafka's ``StripedReplicaPlacer``, registered brokers that
    are fenced count (``usableBrokers``: every registered broker not shutting down) and are
    placed only when the available ones are too few, after them (never as the preferred
    leader); the partition starts with them out of its ISR. Refusals carry the placer's own
    message; creating a topic prefixes it, as Kafka's ``createTopic`` does."""
    live = image.live_brokers()
    fenced = sorted(b.node_id for b in image.brokers.values() if b.fenced and not b.shutting_down)
    if factor < 1:
        raise InvalidReplicationFactorError(
            f"Invalid replication factor {factor}: the replication factor must be positive.")
    if factor > len(live) + len(fenced):
        raise InvalidReplicationFactorError(
            f"The target replication factor of {factor} cannot be reached because only "
            f"{len(live) + len(fenced)} broker(s) are registered.")
    if not live:
        raise InvalidReplicationFactorError("All brokers are currently fenced.")
    spread = _spread(rng, live, count, min(factor, len(live)), first)
    extra = factor - len(live)
    return [replicas + [fenced[(i + j) % len(fenced)] for j in range(extra)] if extra > 0 else replicas
            for i, replicas in enumerate(spread)]


def _spread(rng: random.Random, brokers: list[int], count: int, factor: int, first: int) -> list[list[int]]:
    n = len(brokers)
    start = rng.randrange(n)
    shift = rng.randrange(n)
    out = []
    for p in range(first, first + count):
        if p > 0 and p % n == 0:
            shift += 1
        leader = (start + p) % n
        replicas = [brokers[leader]]
        for j in range(factor - 1):
            replicas.append(brokers[(leader + 1 + (shift + j) % max(1, n - 1)) % n])
        if len(set(replicas)) != factor:  # tiny clusters: fall back to consecutive brokers
            replicas = [brokers[(leader + j) % n] for j in range(factor)]
        out.append(replicas)
    return out


def starting_isrs(image: MetadataImage, assignment: list[list[int]]) -> dict:
    """The "isrs" of a new topic's or partitions' record when some replicas are not available
    (Kafka's ``buildPartitionRegistration`` starts the ISR with the active replicas only);
    :func:`place_replicas` puts an available broker first in every list."""
    live = set(image.live_brokers())
    isrs = [[r for r in replicas if r in live] for replicas in assignment]
    if all(len(isr) == len(replicas) for isr, replicas in zip(isrs, assignment)):
        return {}
    return {"isrs": isrs}


def manual_assignment(image: MetadataImage, assignment: list[list[int]], factor: int | None = None,
                      first: int = 0) -> dict:
    """A ``replica_assignment`` given by the client, as the replicas and starting ISRs of a topic's
    or new partitions' record (Kafka's ``validateManualPartitionAssignment``): every list non-empty,
    of registered brokers, none twice, all of one length (``factor``: the topic's, for new
    partitions, numbered from ``first``); each partition needs an active replica, which leads."""
    live = set(image.live_brokers())
    for index, replicas in enumerate(assignment):
        if not replicas:
            raise InvalidReplicaAssignmentError("The manual partition assignment includes an empty replica list.")
        previous = None
        for broker in sorted(replicas):
            if broker not in image.brokers:
                raise InvalidReplicaAssignmentError(f"The manual partition assignment includes broker {broker}, "
                                                    "but no such broker is registered.")
            if broker == previous:
                raise InvalidReplicaAssignmentError(f"The manual partition assignment includes the broker {broker} "
                                                    "more than once.")
            previous = broker
        if factor is not None and len(replicas) != factor:
            raise InvalidReplicaAssignmentError(
                f"The manual partition assignment includes a partition with {len(replicas)} replica(s), but this is "
                f"not consistent with previous partitions, which have {factor} replica(s).")
        factor = len(replicas)
        if not live.intersection(replicas):
            raise InvalidReplicaAssignmentError(f"All brokers specified in the manual partition assignment for "
                                                f"partition {first + index} are fenced or in controlled shutdown.")
    return {"replicas": [list(r) for r in assignment], **starting_isrs(image, assignment)}
