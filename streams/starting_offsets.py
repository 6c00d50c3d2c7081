"""Where a :class:`~streams.app.StreamsApp`'s query starts without Spark's checkpoint, as Kafka
Streams' ``StreamThread.resetOffsets``: the group's committed offset, else the source's reset policy.

Its own module because it is one rule with its own inputs (the topology's reset policies, the
committed offsets, the partitions' ranges) and its own failure (``auto.offset.reset=none`` with
nothing committed); :mod:`streams.app` only asks it for a fresh query's ``startingOffsets``.
"""
from __future__ import annotations

import logging

from broker.client import AdminClient, Consumer, OffsetSpec, TopicPartition
from streams.errors import StreamsError

log = logging.getLogger("streams.app")  # the application's logger, as before the split

_NO_RESET = -3   # auto.offset.reset=none: a partition without a valid committed offset fails the start


class StartingOffsets:
    """Needs ``topology``, ``app``, ``config``, ``client`` and ``admin`` (from StreamsApp) and
    ``partitions`` (from :class:`~streams.internal_topics.InternalTopics`)."""

    def _reset(self, topic: str) -> int:
        """Where a partition with no committed offset starts: the source's
        ``Consumed.withOffsetResetPolicy``, else ``auto.offset.reset`` (-2 earliest, -1 latest). A
        GlobalKTable's topic is read from the beginning whatever either says, as Kafka's global
        consumer (``auto.offset.reset=none``, then ``seekToBeginning``): it is reference data. An
        internal (repartition) topic is read from its beginning too."""
        if any(c.args.get("global") for n in self.topology.nodes if n.kind == "source" and topic in n.topics
               for c in n.children):
            return -2
        if topic in self.topology.internal_topics(self.app):
            # the application's own repartition topic holds only what its upstream query wrote for
            # it: "latest" would skip what that query wrote before this one's first batch
            return -2
        policy = self.config["auto.offset.reset"]
        from streams.pattern_sources import node_topics
        for n in self.topology.nodes:
            consumed = n.args.get("consumed") if n.kind == "source" else None
            if consumed is not None and consumed.offset_reset and topic in node_topics(self.topology, n):
                policy = consumed.offset_reset
        return -2 if policy == "earliest" else -1 if policy == "latest" else _NO_RESET

    def _committed(self, topics: list[str]) -> dict[str, dict[str, int]]:
        """Where a fresh query starts on each partition: the group's committed offset, else the
        source's reset policy (:meth:`_reset`). A committed offset outside the partition's
        [log start, end] (its records deleted by retention while the application was down, a
        topic re-created) is reset by the policy too, as Kafka's consumer and
        ``StreamThread.resetOffsets`` reset an out-of-range position, instead of starting where
        nothing can be read."""
        c = Consumer({**self.client, "group.id": self.app, "enable.auto.commit": False})
        try:
            tps = [TopicPartition(t, p) for t in topics for p in range(self.partitions(t))]
            out: dict[str, dict[str, int]] = {t: {} for t in topics}
            committed = c.committed(tps, timeout=30)
            ranges = self._ranges([tp for tp in committed if tp.offset >= 0])
            for tp in committed:
                offset, reset = tp.offset, self._reset(tp.topic)
                if offset >= 0:
                    low, high = ranges[(tp.topic, tp.partition)]
                    if not low <= offset <= high:
                        log.info("Committed offset %d of %s-%d is out of range [%d, %d]; resetting it to the %s "
                                 "offset", offset, tp.topic, tp.partition, low, high,
                                 "earliest" if reset == -2 else "latest")
                        offset = reset
                if offset < 0 and reset == _NO_RESET:
                    raise StreamsError(
                        f"No valid committed offset found for input topic {tp.topic} (partition {tp.partition}) "
                        "and no valid reset policy configured. You need to set configuration parameter "
                        "\"auto.offset.reset\" or specify a topic specific reset policy via "
                        "StreamsBuilder.stream(..., Consumed.withOffsetResetPolicy(...)) or "
                        "StreamsBuilder.table(..., Consumed.withOffsetResetPolicy(...))")
                out[tp.topic][str(tp.partition)] = offset if offset >= 0 else reset
            return out
        finally:
            c.close()

    def _ranges(self, tps: list) -> dict[tuple[str, int], tuple[int, int]]:
        """(log start, end) of each partition: two ListOffsets requests for them all."""
        if not tps:
            return {}
        with AdminClient(self.admin) as admin:
            lows, highs = ({(tp.topic, tp.partition): f.result(30).offset for tp, f in
                            admin.list_offsets({TopicPartition(tp.topic, tp.partition): spec for tp in tps}).items()}
                           for spec in (OffsetSpec.earliest(), OffsetSpec.latest()))
        return {key: (lows[key], highs[key]) for key in lows}
