"""The consumer's offsets: ``commit``, ``store_offsets`` and ``committed`` against the group's
committed offsets, and ``get_watermark_offsets``/``offsets_for_times`` against the partitions'
logs, mixed into :class:`~broker.client.consumer.Consumer`.

Commits go through the consumer's :class:`~broker.client.committer.OffsetCommitter`; what an
argument-less or automatic commit sends is read from the fetch state (the positions poll() reached,
or the offsets stored with ``store_offsets``).
"""
from __future__ import annotations

from broker.client.fetcher import list_offset
from broker.client.message import OFFSET_INVALID, Message, TopicPartition
from broker.client.start_offsets import EARLIEST, LATEST
from broker.errors import InvalidConfigError, KafkaError, KafkaException


class ConsumerOffsets:
    """Needs the fetch state and its lock, the cluster, the coordinator and committer, and
    ``_check_open`` (from Consumer)."""

    # --------------------------------------------------------------------------- commits
    def commit(self, message: Message | None = None, offsets: list[TopicPartition] | None = None,
               asynchronous: bool = True):
        """Commit ``message.offset() + 1``, the given ``offsets``, or every assigned partition's
        position. Asynchronous by default, as in confluent-kafka: returns None at once, and
        ``on_commit(err, partitions)`` reports from a later ``poll()``/``consume()``/``close()``;
        ``asynchronous=False`` waits, returns the committed partitions and raises on failure.
        A message with an error (a ``_PARTITION_EOF`` event...) is refused with ``_INVALID_ARG``:
        its offset is not a record's, and committing past it would skip the next record.

        Without arguments only assigned partitions whose offset differs from the committed one are
        sent; when there is none it fails with ``_NO_OFFSET`` (raised, or given to ``on_commit``
        when asynchronous), as librdkafka's ``rd_kafka_cgrp_assigned_offsets_commit``, and while
        the assignment is lost and ``poll()`` has not handled it yet, with ``_ASSIGNMENT_LOST``."""
        self._check_open()
        if self._coordinator is None:
            raise InvalidConfigError("commit() needs group.id", config="group.id")
        if self._fatal_error is not None:   # librdkafka: "Commits are not allowed when a fatal error has been raised"
            if not asynchronous:
                raise KafkaException(self._fatal_error)
            self._committer.report(self._fatal_error, [])
            return None
        if message is not None and offsets is not None:
            raise ValueError("message and offsets are mutually exclusive")
        if message is not None:
            _check_no_error(message, "commit")
            tps = [TopicPartition(message.topic(), message._partition, message._offset + 1)]
        elif offsets is not None:
            tps = list(offsets)
        else:
            if self._membership is not None and self._membership.assignment_lost:
                # librdkafka's rd_kafka_cgrp_offsets_commit: the positions of a lost assignment
                # could move back what the partitions' new owner committed.
                error = KafkaError(KafkaError._ASSIGNMENT_LOST, "Local: Group partitions lost")
                if not asynchronous:
                    raise KafkaException(error)
                self._committer.report(error, [])
                return None
            tps = self._committer.uncommitted(self._to_commit())
            if not tps:
                error = KafkaError(KafkaError._NO_OFFSET, "Local: No offset stored")
                if not asynchronous:
                    raise KafkaException(error)
                self._committer.report(error, [])
                return None
        if not asynchronous:
            return self._committer.commit_sync(tps, self.config["request.timeout.ms"] / 1000.0)
        self._committer.commit_async(tps)
        return None

    def _maybe_auto_commit(self) -> None:
        if self._committer.auto_commit_due():
            self._committer.commit_moved(self._to_commit())

    def _to_commit(self, keys=None) -> list[TopicPartition]:
        """What an automatic or argument-less commit stores: the positions poll() reached, or, with
        ``enable.auto.offset.store=false``, the offsets given to ``store_offsets``."""
        with self._cond:
            return self._fetch_state.to_commit(keys, stored=not self._auto_store)

    def store_offsets(self, message: Message | None = None, offsets: list[TopicPartition] | None = None) -> None:
        """Store ``message.offset() + 1`` or the given ``offsets`` for the next automatic or
        argument-less commit; needs ``enable.auto.offset.store=false``. Only assigned partitions
        take one (an assignment starts with none): when no partition given is assigned this fails
        with ``_STATE``, as librdkafka's ``rd_kafka_offsets_store``."""
        self._check_open()
        if self._auto_store:
            raise KafkaException(KafkaError(KafkaError._INVALID_ARG,
                                            "store_offsets() needs enable.auto.offset.store=false"))
        if message is not None and offsets is not None:
            raise ValueError("message and offsets are mutually exclusive")
        if message is None and offsets is None:
            raise ValueError("expected either message or offsets")
        if message is not None:
            _check_no_error(message, "store")
            # The raw fields, as confluent's C code reads them: a Message built without an offset
            # (accessor None) still commits OFFSET_INVALID + 1, not a TypeError.
            offsets = [TopicPartition(message.topic(), message._partition, message._offset + 1,
                                      leader_epoch=message.leader_epoch())]
        with self._cond:
            stored = [self._fetch_state.store(TopicPartition(tp.topic, tp.partition, tp.offset, tp.metadata,
                                                             tp.leader_epoch)) for tp in offsets]
        if offsets and not any(stored):
            tp = offsets[-1]
            raise KafkaException(KafkaError(KafkaError._STATE,
                                            f"{tp.topic} [{tp.partition}] is not assigned: cannot store its offset"))

    def committed(self, partitions: list[TopicPartition], timeout: float | None = None) -> list[TopicPartition]:
        """The group's committed offset of each partition (``OFFSET_INVALID`` where there is none)."""
        self._check_open()
        if self._coordinator is None:
            raise InvalidConfigError("committed() needs group.id", config="group.id")
        found = self._committer.committed_offsets(
            {(tp.topic, tp.partition) for tp in partitions},
            self.config["request.timeout.ms"] / 1000.0 if timeout is None else timeout, with_metadata=True)
        out = []
        for tp in partitions:
            offset, metadata, epoch = found.get((tp.topic, tp.partition), (OFFSET_INVALID, None, -1))
            out.append(TopicPartition(tp.topic, tp.partition, offset, metadata or None,
                                      leader_epoch=epoch if offset >= 0 and epoch >= 0 else None))
        return out

    # --------------------------------------------------------------------------- offsets
    def get_watermark_offsets(self, partition: TopicPartition, timeout: float | None = None,
                              cached: bool = False) -> tuple[int, int]:
        """(low, high): the log start offset and the high watermark. ``cached``: as the last fetch
        saw them, without a request (``OFFSET_INVALID`` before one; a partition the consumer does
        not know fails with ``_UNKNOWN_PARTITION``, as librdkafka's ``rd_kafka_get_watermark_offsets``)."""
        self._check_open()
        if cached:
            key = (partition.topic, partition.partition)
            with self._cond:
                marks = self._fetch_state.watermarks(key)
            if marks is not None:
                return marks
            topic = self.cluster.topics.get(key[0])
            if topic is None or key[1] not in topic.partitions:
                raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION,
                                                f"{key[0]} [{key[1]}] is not a known partition"))
            return OFFSET_INVALID, OFFSET_INVALID
        return tuple(list_offset(self.cluster, self.config, partition.topic, partition.partition, at, timeout)[0]
                     for at in (EARLIEST, LATEST))

    def offsets_for_times(self, partitions: list[TopicPartition], timeout: float | None = None):
        """For each partition (offset = a timestamp in ms): the first offset at or after it, or -1,
        with the leader epoch that wrote it (so ``seek()`` to it is validated, KIP-320)."""
        self._check_open()
        out = []
        for tp in partitions:
            offset, _, epoch = list_offset(self.cluster, self.config, tp.topic, tp.partition, tp.offset, timeout)
            out.append(TopicPartition(tp.topic, tp.partition, offset, leader_epoch=epoch if epoch >= 0 else None))
        return out


def _check_no_error(message: Message, action: str) -> None:
    """confluent-kafka's refusal of what is not a Message (TypeError) and of an error event's offset."""
    if not isinstance(message, Message):
        raise TypeError(f"expected Message, not {type(message).__name__}")
    error = message.error()
    if error is not None:
        reason = error.str() if isinstance(error, KafkaError) else str(error)
        raise KafkaException(KafkaError(KafkaError._INVALID_ARG,
                                        f"Cannot {action} offsets for message with error: '{reason}'"))
