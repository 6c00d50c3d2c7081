"""The consumer's offsets: ``commit``, ``store_offsets`` and ``committed`` against the group's
committed offsets, and ``get_watermark_offsets``/``offsets_for_times`` against the partitions'
logs, mixed into :class:`~broker.client.consumer.Consumer`.

Commits go through the consumer's :class:`~broker.client.committer.OffsetCommitter`; what an
argument-less or automatic commit sends is read from the fetch state (the positions poll() reached,
or the offsets stored with ``store_offsets``).
"""
from __future__ import annotations

import time

from broker.client.fetcher import list_offset
from broker.client.message import OFFSET_INVALID, Message, TopicPartition
from broker.client.start_offsets import EARLIEST, LATEST
from broker.errors import InvalidConfigError, KafkaError, KafkaException, RiverlogError


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

        Only absolute offsets are sent: a partition given a negative one (``OFFSET_INVALID``...)
        keeps its committed offset. Without arguments only assigned partitions whose offset differs
        from the committed one are sent. When nothing is left to send it fails with ``_NO_OFFSET``
        (raised, or given to ``on_commit`` when asynchronous), as librdkafka's
        ``rd_kafka_cgrp_offsets_commit``; without arguments, while
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
            tps = [TopicPartition(message.topic(), message._partition, message._offset + 1,
                                  leader_epoch=message.leader_epoch())]  # as confluent-kafka's (KIP-320)
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
        # librdkafka's rd_kafka_cgrp_offsets_commit: only absolute offsets are sent (a partition
        # given OFFSET_INVALID, e.g. from position() before a fetch, keeps its committed offset),
        # and with none to send the commit fails with _NO_OFFSET.
        valid = [tp for tp in tps if tp.offset >= 0]
        if not valid:
            error = KafkaError(KafkaError._NO_OFFSET, "Local: No offset stored")
            if not asynchronous:
                raise KafkaException(error)
            self._committer.report(error, [])
            return None
        if not asynchronous:
            self._committer.commit_sync(valid, self.config["request.timeout.ms"] / 1000.0)
            return tps
        self._committer.commit_async(valid)
        return None

    def _maybe_auto_commit(self) -> None:
        if self._committer.auto_commit_due():
            self._committer.commit_moved(self._to_commit())

    def _to_commit(self, keys=None) -> list[TopicPartition]:
        """What an automatic or argument-less commit stores: the positions poll() reached, or, with
        ``enable.auto.offset.store=false``, the offsets given to ``store_offsets``."""
        with self._cond:
            tps = self._fetch_state.to_commit(keys, stored=not self._auto_store)
        return [tp for tp in tps if tp.offset >= 0]  # a stored logical offset is not committed

    def store_offsets(self, message: Message | None = None, offsets: list[TopicPartition] | None = None) -> None:
        """Store ``message.offset() + 1`` or the given ``offsets`` for the next automatic or
        argument-less commit; needs ``enable.auto.offset.store=false``. Only assigned partitions
        take one (an assignment starts with none): when no partition given is assigned this fails,
        as librdkafka's ``rd_kafka_offsets_store``, with the last one's error: ``_STATE`` when it is
        known but not assigned, ``_UNKNOWN_PARTITION`` when the client does not know it."""
        self._check_open()
        if self._auto_store:
            raise KafkaException(KafkaError(KafkaError._INVALID_ARG,   # confluent-kafka's message
                                            "StoreOffsets failed: Local: Invalid argument or configuration"))
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
            # librdkafka's rd_kafka_offsets_store fails with the last partition's error: one the
            # client does not know _UNKNOWN_PARTITION, one known but not assigned _STATE.
            tp = offsets[-1]
            code = KafkaError._STATE if self._known_partition((tp.topic, tp.partition)) \
                else KafkaError._UNKNOWN_PARTITION
            raise KafkaException(KafkaError(code, f"StoreOffsets failed: {KafkaError(code).str()}"))

    def committed(self, partitions: list[TopicPartition], timeout: float | None = None) -> list[TopicPartition]:
        """The group's committed offset of each partition (``OFFSET_INVALID`` where there is none).
        ``timeout`` None or negative (confluent-kafka's "no timeout", -1) waits ``request.timeout.ms``,
        retrying a coordinator still loading, as the consumer's other requests do."""
        self._check_open()
        if self._coordinator is None:
            raise InvalidConfigError("committed() needs group.id", config="group.id")
        found = self._committer.committed_offsets(
            {(tp.topic, tp.partition) for tp in partitions},
            self.config["request.timeout.ms"] / 1000.0 if timeout is None or timeout < 0 else timeout,
            with_metadata=True)
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
        deadline = _deadline(timeout)
        self._check_partition(partition, deadline, "Failed to get watermark offsets")
        return tuple(list_offset(self.cluster, self.config, partition.topic, partition.partition, at,
                                 _remaining(deadline))[0] for at in (EARLIEST, LATEST))

    def offsets_for_times(self, partitions: list[TopicPartition], timeout: float | None = None):
        """For each partition (offset = a timestamp in ms): the first offset at or after it, or -1,
        with the leader epoch that wrote it (so ``seek()`` to it is validated, KIP-320). ``timeout``
        bounds the whole call; an empty list is ``_INVALID_ARG``, as librdkafka's
        ``rd_kafka_offsets_for_times``."""
        self._check_open()
        if not partitions:
            raise KafkaException(KafkaError(KafkaError._INVALID_ARG,
                                            "Failed to get offsets: Local: Invalid argument or configuration"))
        deadline = _deadline(timeout)
        for tp in partitions:
            self._check_partition(tp, deadline, "Failed to get offsets")
        out = []
        for tp in partitions:
            offset, _, epoch = list_offset(self.cluster, self.config, tp.topic, tp.partition, tp.offset,
                                           _remaining(deadline))
            out.append(TopicPartition(tp.topic, tp.partition, offset, leader_epoch=epoch if epoch >= 0 else None))
        return out

    def _check_partition(self, tp: TopicPartition, deadline: float | None, failed: str) -> None:
        """A partition its topic does not have is a permanent ``_UNKNOWN_PARTITION`` at once, as
        librdkafka's ``rd_kafka_topic_partition_list_get_leaders``, not retried until the timeout."""
        info = self.cluster.topics.get(tp.topic)
        if info is None or tp.partition not in info.partitions:
            try:
                self.cluster.refresh([tp.topic], timeout=_remaining(deadline))
            except RiverlogError:
                return  # the request's own retries decide
            info = self.cluster.topics.get(tp.topic)
        if info is not None and info.partitions and tp.partition not in info.partitions:
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION, f"{failed}: Local: Unknown partition"))


def _check_no_error(message: Message, action: str) -> None:
    """confluent-kafka's refusal of what is not a Message (TypeError) and of an error event's offset."""
    if not isinstance(message, Message):
        raise TypeError(f"expected Message, not {type(message).__name__}")
    error = message.error()
    if error is not None:
        reason = error.str() if isinstance(error, KafkaError) else str(error)
        raise KafkaException(KafkaError(KafkaError._INVALID_ARG,
                                        f"Cannot {action} offsets for message with error: '{reason}'"))


def _deadline(timeout: float | None) -> float | None:
    """One deadline for a call's requests; a negative timeout waits as long as None does."""
    return None if timeout is None or timeout < 0 else time.monotonic() + timeout


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else max(0.0, deadline - time.monotonic())
