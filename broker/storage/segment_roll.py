"""When a log's active segment rolls: Kafka's ``LogSegment.shouldRoll`` and ``LogConfig.maxSegmentMs``.

A rule of its own, apart from :class:`~broker.storage.log.Log`'s appends: it decides from the
active segment, the topic's config and the batches about to be appended, and changes nothing. Pure.
"""
from __future__ import annotations

from broker.config import Config
from broker.storage.segment import LogSegment

_MAX_RELATIVE_OFFSET = 2**31 - 1  # an index entry holds an offset relative to its segment's base


def should_roll(active: LogSegment, config: Config, incoming: int, last_offset: int, now: int,
                incoming_ts: int) -> bool:
    """Roll before appending ``incoming`` bytes ending at ``last_offset``? An empty segment rolls
    only when that offset would not fit its relative offsets (a follower's first batch after a
    compaction gap)."""
    if last_offset - active.base_offset > _MAX_RELATIVE_OFFSET:
        return True
    if active.size == 0:
        return False
    return (active.size + incoming > config["segment.bytes"]
            or active.time_waited_for_roll(now, incoming_ts) > max_segment_ms(config))


def max_segment_ms(config: Config) -> int:
    """``segment.ms``, or for a compacted log ``max.compaction.lag.ms`` if smaller: the cleaner
    never touches the active segment, which must not keep superseded or deleted values longer than
    the lag promises."""
    if "compact" in config["cleanup.policy"]:
        return min(config["segment.ms"], config["max.compaction.lag.ms"])
    return config["segment.ms"]
