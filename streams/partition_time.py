"""Which sources keep their partition time from one batch to the next: Kafka's ``RecordQueue``
hands it to the timestamp extractor and ``StreamTask`` commits it with the offsets
(``TopicPartitionMetadata``), so it survives commits and restarts. On Spark a task keeps it in its
meta, which a sub-topology with no store keeps only when some source's extractor reads it
(:attr:`streams.topology.SubTopology.stateful`): the all-SQL and default-extractor paths pay nothing."""
from __future__ import annotations

from streams.parameters import uses_partition_time


def source_extractor(node, default_extractor=None):
    """The timestamp extractor of a source node's records: its ``Consumed``'s, else, for a topic of
    the topology's own, ``default_extractor`` (an internal topic's records keep the timestamps the
    application wrote)."""
    own = getattr(node.args.get("consumed"), "timestamp_extractor", None)
    return own if own is not None else (None if node.internal else default_extractor)


def reads_partition_time(nodes, default_extractor=None) -> bool:
    """Whether a source among ``nodes`` has an extractor that reads the partition time."""
    extractors = (source_extractor(n, default_extractor) for n in nodes if n.kind == "source")
    return any(e is not None and uses_partition_time(e) for e in extractors)


def with_default_extractor(topology, extractor):
    """``topology`` under an application's ``default.timestamp.extractor``: the same nodes, its
    sub-topologies marked where a source's extractor reads the partition time (the topology given
    is left as it is: the test driver and other applications may share it)."""
    import copy
    from dataclasses import replace
    out = copy.copy(topology)
    out.subtopologies = [replace(s, partition_time=reads_partition_time(s.nodes, extractor))
                         for s in topology.subtopologies]
    return out
