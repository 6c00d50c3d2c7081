"""A ``replica_assignment`` of ``NewTopic`` or ``NewPartitions``, checked as confluent-kafka and
librdkafka check it before sending (a ``ValueError`` at the call) and turned into the request's
per-partition broker lists; the controller checks it against the cluster (registered brokers,
one replication factor) and answers ``INVALID_REPLICA_ASSIGNMENT`` per topic."""
from __future__ import annotations

from broker.proto import riverlog_pb2 as pb


def _lists(assignment, count_desc: str) -> list[list[int]]:
    shape = f"replica_assignment must be a list of int lists with an outer size of {count_desc}"
    if not isinstance(assignment, list):
        raise ValueError(shape)
    out = []
    for replicas in assignment:
        if not isinstance(replicas, list) or not replicas or \
                not all(isinstance(b, int) and not isinstance(b, bool) for b in replicas):
            raise ValueError(shape)
        out.append(list(replicas))
    return out


def topic_assignments(new_topic) -> list[pb.ReplicaAssignment]:
    """``NewTopic``: exclusive with a replication factor and with the default partition count; one
    list per partition. A topic with an assignment is sent with both counts -1, as librdkafka."""
    if not new_topic.replica_assignment:
        return []
    if new_topic.replication_factor != -1:
        raise ValueError("replication_factor and replica_assignment are mutually exclusive")
    if new_topic.num_partitions == -1:
        raise ValueError("Specifying a default partition count and a replica assignment are mutually exclusive")
    lists = _lists(new_topic.replica_assignment, "num_partitions")
    if len(lists) != new_topic.num_partitions:
        raise ValueError("replica_assignment must be a list of int lists with an outer size of num_partitions")
    return [pb.ReplicaAssignment(broker_ids=r) for r in lists]


def partition_assignments(new_partitions) -> list[pb.ReplicaAssignment]:
    """``NewPartitions``: one list per partition added (the broker checks the count against the
    topic's), at most ``new_total_count``."""
    if not new_partitions.replica_assignment:
        return []
    desc = "new_total_count - existing partition count"
    lists = _lists(new_partitions.replica_assignment, desc)
    if len(lists) > new_partitions.new_total_count:
        raise ValueError(f"replica_assignment must be a list of int lists with an outer size of {desc}")
    return [pb.ReplicaAssignment(broker_ids=r) for r in lists]
