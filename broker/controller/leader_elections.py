"""Leader elections an administrator asks for (``ElectLeaders``, Kafka's
``ReplicationControlManager.electLeaders``), PREFERRED or UNCLEAN, as metadata records and a
per-partition error for each partition that was not elected. Pure: the image in, records out;
the controller's own elections (a broker lost or back) are its upkeep, not these."""
from __future__ import annotations

from broker.errors import (ElectionNotNeededError, EligibleLeadersNotAvailableError, PreferredLeaderNotAvailableError,
                           RiverlogError, UnknownTopicOrPartitionError)
from broker.metadata.image import MetadataImage, PartitionState
from broker.replication.election import elect_leader


def elect_leaders(image: MetadataImage, topic: str, partitions: list[int] | None,
                  unclean: bool = False) -> tuple[list[dict], dict[int, RiverlogError]]:
    """(records, {partition: error}) for the partitions named (None: every partition of the
    topic). PREFERRED, per partition as ``electLeader`` and
    ``PartitionChangeBuilder.electPreferredLeader``: the preferred (first) replica leads if it is
    in the ISR and available; ELECTION_NOT_NEEDED when it leads already;
    PREFERRED_LEADER_NOT_AVAILABLE when it cannot lead and the current leader stays (a leaderless
    partition gets another available ISR member instead). UNCLEAN: only a leaderless partition
    (else ELECTION_NOT_NEEDED), led by its first live ISR member, else by its first live replica,
    which becomes the ISR (records only the others held are lost: the operator's choice);
    ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is live. UNKNOWN_TOPIC_OR_PARTITION for a
    partition the topic does not have."""
    t = image.topics.get(topic)
    if t is None:
        raise UnknownTopicOrPartitionError(f"No such topic as {topic}")
    live = set(image.live_brokers())
    records: list[dict] = []
    errors: dict[int, RiverlogError] = {}
    for index in (range(t.num_partitions) if partitions is None else partitions):
        if not 0 <= index < t.num_partitions:
            errors[index] = UnknownTopicOrPartitionError(f"No such partition as {topic}-{index}")
            continue
        elect = _unclean if unclean else _preferred
        change = elect(topic, index, t.partitions[index], live, errors)
        if change:
            records.append({"type": "partition_change", "topic_id": t.topic_id, "partition": index, **change})
    return records, errors


def _preferred(topic: str, index: int, p: PartitionState, live: set[int], errors: dict) -> dict | None:
    if p.leader == p.replicas[0]:
        errors[index] = ElectionNotNeededError(f"{topic}-{index}: the preferred replica {p.leader} is the leader already")
        return None
    eligible = [r for r in p.replicas if r in p.isr and r in live]
    if p.replicas[0] in eligible:
        return {"leader": p.replicas[0]}
    if p.leader in eligible or not eligible:
        errors[index] = PreferredLeaderNotAvailableError(
            f"{topic}-{index}: the preferred replica {p.replicas[0]} is not available or not in "
            f"the ISR {p.isr}; the leader stays {p.leader}")
        return None
    return {"leader": eligible[0]}


def _unclean(topic: str, index: int, p: PartitionState, live: set[int], errors: dict) -> dict | None:
    if p.leader != -1:
        errors[index] = ElectionNotNeededError(f"{topic}-{index}: the partition has a leader ({p.leader})")
        return None
    leader = elect_leader(p.replicas, p.isr, live, unclean=True)
    if leader is None:
        errors[index] = EligibleLeadersNotAvailableError(f"{topic}-{index}: no replica of {p.replicas} is live")
        return None
    return {"leader": leader} if leader in p.isr else {"leader": leader, "isr": [leader]}
