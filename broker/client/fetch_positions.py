"""What the application has reached in each assigned partition: its position, the watermarks the
last fetch saw, and the offsets a commit stores. Part of :class:`broker.client.fetch_state.FetchState`
(a mixin over its partitions), kept apart because it is the commit's view of the fetch state, as
librdkafka's app position and stored offset (``rd_kafka_offset_store0``), read and never moved here.

Pure and not thread-safe, as the fetch state: called under the consumer's lock.
"""
from __future__ import annotations

from broker.client.message import OFFSET_INVALID, TopicPartition

TP = tuple[str, int]


class FetchPositions:
    """Positions and stored offsets of the fetch state's ``partitions``."""

    def position(self, key: TP) -> int:
        """The offset of the next record for the application, or ``OFFSET_INVALID`` while it has
        none yet (a logical start offset is not a position, as librdkafka's app position)."""
        state = self.partitions.get(key)
        return state.position if state is not None and state.position >= 0 else OFFSET_INVALID

    def app_position(self, key: TP) -> TopicPartition | None:
        """The position with the leader epoch of the record before it (librdkafka's app position),
        ``OFFSET_INVALID`` while it has none; None for a partition not assigned."""
        state = self.partitions.get(key)
        if state is None:
            return None
        if state.position < 0:
            return TopicPartition(key[0], key[1], OFFSET_INVALID)
        return TopicPartition(key[0], key[1], state.position, leader_epoch=state.epoch if state.epoch >= 0 else None)

    def positions(self, keys=None) -> list[TopicPartition]:
        """Known positions (what a commit would store): of ``keys`` in key order, or of every
        assigned partition in assignment order."""
        return self.to_commit(keys)

    def watermarks(self, key: TP) -> tuple[int, int] | None:
        """(log start offset, high watermark) as the last fetch saw them, ``OFFSET_INVALID`` for
        what no fetch told yet; None for a partition not assigned."""
        state = self.partitions.get(key)
        if state is None:
            return None
        return tuple(v if v >= 0 else OFFSET_INVALID for v in (state.log_start_offset, state.high_watermark))

    def to_commit(self, keys=None, stored: bool = False) -> list[TopicPartition]:
        """What an automatic or argument-less commit stores for the assigned partitions (of ``keys``
        in key order, else in assignment order): their positions, or with ``stored`` the offsets
        given to ``store_offsets``. librdkafka's ``rd_kafka_topic_partition_list_set_offsets``:
        only the current assignment, nothing a partition has not reached or been given."""
        keys = self.partitions if keys is None else sorted(keys)
        out = []
        for key in keys:
            state = self.partitions.get(key)
            if state is None:
                continue
            if stored:
                if state.stored is not None:
                    out.append(state.stored)
            elif state.position >= 0:
                out.append(TopicPartition(key[0], key[1], state.position,
                                          leader_epoch=state.epoch if state.epoch >= 0 else None))
        return out

    def store(self, tp: TopicPartition) -> bool:
        """Keep ``tp`` for the next commit; False when its partition is not assigned (librdkafka's
        ``rd_kafka_offset_store0`` refuses it with ``_STATE``). An assignment starts with none."""
        state = self.partitions.get((tp.topic, tp.partition))
        if state is None:
            return False
        state.stored = tp
        return True
