"""The leader's produce side: validating a produce payload (control and delete-horizon bits,
keys on compacted topics, timestamps, recompression, idempotent sequences), appending it with
offsets assigned here, writing transaction markers, and waiting for ``acks=all`` replication.
Mixed into :class:`~broker.partition.Partition`.

Validation that needs no partition state runs before the lock is taken; the leadership, ISR and
producer-sequence checks and the append itself run under it, and producer state is updated only
after the log append succeeded.
"""
from __future__ import annotations

import time
from typing import NamedTuple

from broker.config import LONG_MAX, LONG_MIN, timestamp_bounds
from broker.errors import (InvalidRecordError, InvalidTimestampError, MessageTooLargeError,
                           NotEnoughReplicasAfterAppendError, NotEnoughReplicasError, NotLeaderOrFollowerError,
                           OutOfOrderSequenceError, RequestTimedOutError)
from broker.partition_leadership import LEADER
from broker.records.batch import HEADER_SIZE, increment_sequence, validate_batches
from broker.records.control import marker_batch

NO_TIMESTAMP = -1  # Kafka's RecordBatch.NO_TIMESTAMP
_ROLL_MARGIN_MS = 60_000  # append_is_quick: a time-based roll this close is left to a pool thread
_RELATIVE_OFFSETS_QUICK = 2**31 - 2**20  # ... and so is a roll for relative offsets running out


class LeaderAppendInfo(NamedTuple):
    """What a leader's append wrote (the fields of :class:`AppendInfo`) and the leader epoch it was
    written in: an ``acks=all`` wait is for that epoch, read under the same lock as the append, so
    a leadership change between the append and the wait can never make another epoch's high
    watermark (over records that replaced these after a truncation) answer for it."""
    first_offset: int
    last_offset: int
    log_append_time: int
    record_count: int
    leader_epoch: int


class PartitionProduce:
    """Needs the lock, ``hw_changed``, the log, the producer state, the leader state, the notifier,
    the clock and ``_check_leader``/``_advance_hw`` (from Partition)."""

    # ------------------------------------------------------------------------------ leader: produce
    def append_records(self, data, acks: int = 1, min_insync_replicas: int | None = None) -> LeaderAppendInfo:
        """Validate a produce payload, then append it as leader (offsets assigned here)."""
        headers = validate_batches(data, max_batch_bytes=self.log.config["max.message.bytes"])
        if any(h.is_control for h in headers):
            raise InvalidRecordError("control batches (transaction markers) are written by the transaction "
                                     "coordinator, not produced")
        if any(h.delete_horizon_ms is not None for h in headers):   # only the cleaner sets it
            raise InvalidRecordError("a produced batch may not set the delete-horizon attribute (bit 6): the log "
                                     "cleaner sets it when it first keeps a tombstone")
        for h in headers:   # Kafka's LogValidator.validateBatch, for batches from a client
            if h.producer_id >= 0 and h.base_sequence < 0:
                raise InvalidRecordError(
                    f"Invalid sequence number {h.base_sequence} in record batch with producerId {h.producer_id} "
                    f"in topic partition {self.topic}-{self.index}")
        if "compact" in self.log.config["cleanup.policy"]:
            self._check_keys(data, headers)
        if self.log.config["message.timestamp.type"] == "CreateTime":
            data, headers = _record_times(data, headers)
        self._check_timestamps(data, headers)
        if self.log.config["compression.type"] != "producer":
            from broker.records.arrow_body import recompress
            data, headers = recompress(data, headers, self.log.config["compression.type"])
            limit = self.log.config["max.message.bytes"]
            for h in headers:   # the stored batch is what fetchers sized to max.message.bytes read
                if h.size > limit:
                    raise MessageTooLargeError(
                        f"batch of {h.size} bytes once recompressed with compression.type="
                        f"{self.log.config['compression.type']} exceeds max.message.bytes={limit}",
                        batch_bytes=h.size, max_message_bytes=limit)
        with self.lock:
            self._check_leader()
            if acks == -1:
                self._check_min_isr(min_insync_replicas)
            resent = self._check_producers(headers)
            if resent is not None:
                return self._resent_info(resent)
            active = self.log.active.base_offset
            info = self.log.append(data, headers, self.leader_epoch)
            offset = info.first_offset
            now = self.clock.time_ms()
            for h in headers:   # remembered as stored: a LogAppendTime batch with the time it was stamped
                stored = h if info.log_append_time < 0 else h._replace(max_timestamp=info.log_append_time)
                self.producers.update(stored, offset, offset + h.last_offset_delta, now)
                offset += h.last_offset_delta + 1
            if self.log.active.base_offset != active:
                self.snapshot_producers()
            self.leader_state.on_leader_append(self.log.log_end_offset, self.clock.time_ms())
            self._advance_hw()
            appended = LeaderAppendInfo(*info, self.leader_epoch)
        self.notifier.bump()
        return appended

    def _resent_info(self, resent) -> LeaderAppendInfo:
        """The answer to a resent idempotent batch: where it was written and, on a LogAppendTime
        topic, the time it was stamped with, as Kafka answers a duplicate (``UnifiedLog.append``:
        ``setLogAppendTime(duplicate.timestamp)``), so the producer's delivery report shows the
        record as stored. On a CreateTime topic -1: Kafka's answer there is the batch's CreateTime,
        which a client would report as a LogAppendTime."""
        stamped = self.log.config["message.timestamp.type"] == "LogAppendTime"
        return LeaderAppendInfo(resent.first_offset, resent.last_offset, resent.timestamp if stamped else -1,
                                resent.last_offset - resent.first_offset + 1, self.leader_epoch)

    def append_is_quick(self, incoming: int) -> bool:
        """Whether appending ``incoming`` bytes here is a copy into the page cache: no fsync due
        (``flush.messages``/``flush.ms`` unset), no segment roll near (its fsync of the old segment
        can take long), no recompression. A hint read without the lock, for where to run an append."""
        config = self.log.config
        if (config["flush.messages"] < LONG_MAX or config["flush.ms"] < LONG_MAX
                or config["compression.type"] != "producer"):
            return False
        active = self.log.active
        now = self.clock.time_ms()
        return (active.size + incoming < config["segment.bytes"]
                and active.time_waited_for_roll(now, now) < config["segment.ms"] - _ROLL_MARGIN_MS
                and active.next_offset - active.base_offset < _RELATIVE_OFFSETS_QUICK)

    def _check_timestamps(self, data, headers) -> None:
        """Refuse a batch that says its timestamps are LogAppendTime (attribute bit 3): only the
        broker stamps that, on a LogAppendTime topic (Kafka's ``LogValidator.validateTimestamp``:
        "Producer should not set timestamp type to LogAppendTime"), else a CreateTime topic would
        serve the producer's times as the broker's.

        With CreateTime, refuse a batch holding a record whose timestamp is further in the past or
        future than ``message.timestamp.before.max.ms`` / ``message.timestamp.after.max.ms`` allow
        (the deprecated ``message.timestamp.difference.max.ms`` where one is unset, see
        :func:`~broker.config.timestamp_bounds`; Kafka: InvalidTimestamp, checked per record; -1,
        RecordBatch.NO_TIMESTAMP, is skipped).
        The header's base (smallest) and max timestamps, which :func:`_record_times` took from the
        records, decide; a body is read again only when they show a record out of range (to name
        it) or when the base is -1, which hides the smallest real timestamp."""
        for h in headers:
            if h.is_log_append_time:
                raise InvalidTimestampError(
                    f"{self.topic}-{self.index}: invalid timestamp type in batch with timestamp {h.max_timestamp}. "
                    "Producer should not set timestamp type to LogAppendTime.")
        config = self.log.config
        if config["message.timestamp.type"] != "CreateTime":
            return
        (before_key, before), (after_key, after) = timestamp_bounds(config)
        if before >= LONG_MAX and after >= LONG_MAX:
            return
        now = self.clock.time_ms()
        low, high = max(now - before, LONG_MIN), min(now + after, LONG_MAX)
        pos = index = 0
        for h in headers:
            outside = h.max_timestamp > high or (h.base_timestamp != NO_TIMESTAMP and h.base_timestamp < low)
            if outside or (h.base_timestamp == NO_TIMESTAMP and h.max_timestamp != NO_TIMESTAMP):
                record, ts = _first_outside(memoryview(data)[pos + HEADER_SIZE: pos + h.size], low, high)
                if record is None and outside:   # the header claims times its body does not hold
                    record, ts = 0, h.max_timestamp if h.max_timestamp > high else h.base_timestamp
                if record is not None:
                    raise InvalidTimestampError(
                        f"{self.topic}-{self.index}: Timestamp {ts} of message with offset {index + record} is out "
                        f"of range. The timestamp should be within [{low}, {high}] ({before_key}={before}"
                        + ("" if after_key == before_key else f", {after_key}={after}") + ")")
            pos += h.size
            index += h.record_count

    def _check_producers(self, headers):
        """Sequence checks of idempotent batches; the earlier append when the request resends one."""
        following: dict[int, int] = {}
        for i, h in enumerate(headers):
            if h.producer_id < 0:
                continue
            if h.producer_id in following:
                if h.base_sequence != increment_sequence(following[h.producer_id], 1):
                    raise OutOfOrderSequenceError(
                        f"producer {h.producer_id} sent sequence {h.base_sequence} after "
                        f"{following[h.producer_id]} in one request")
            else:
                resent = self.producers.check(h)
                if resent is not None:
                    if len(headers) > 1:
                        raise OutOfOrderSequenceError(
                            f"producer {h.producer_id} resent sequence {h.base_sequence} together with "
                            "other batches; a resent batch must come alone")
                    return resent
            following[h.producer_id] = h.last_sequence
        return None

    def _check_keys(self, data, headers) -> None:
        """A compacted topic keeps the latest record per key, so a record without one is refused
        (Kafka: InvalidRecord). Costs a decode of each body: zero-copy unless compressed."""
        from broker.records.arrow_body import decode_produced
        view, pos = memoryview(data), 0
        for h in headers:
            missing = decode_produced(view[pos + HEADER_SIZE: pos + h.size]).column(0).null_count
            if missing:
                raise InvalidRecordError(
                    f"{self.topic} is compacted (cleanup.policy={self.log.config['cleanup.policy']}): every record "
                    f"needs a key, but {missing} record(s) of the batch at byte {pos} have none")
            pos += h.size

    # ------------------------------------------------------------------------------ leader: acks=all
    def _check_min_isr(self, min_insync_replicas: int | None = None) -> None:
        """Before an acks=all append (the lock held): refuse it while the ISR is smaller than
        ``min.insync.replicas`` capped at the replication factor (Kafka's effectiveMinIsr)."""
        required = self.log.config["min.insync.replicas"] if min_insync_replicas is None else min_insync_replicas
        required = min(required, len(self.replicas))
        if len(self.isr) < required:
            raise NotEnoughReplicasError(
                f"{self.topic}-{self.index} has {len(self.isr)} in-sync replica(s) {self.isr}; "
                f"acks=all needs min.insync.replicas={required}")

    def wait_for_replication(self, info: LeaderAppendInfo, timeout: float) -> None:
        """Block an acks=all produce until every ISR member holds its batch (the HW passed it) in
        the leader epoch it was appended in."""
        self.wait_for_high_watermark(info.last_offset + 1, timeout, info.leader_epoch)

    def wait_for_high_watermark(self, offset: int, timeout: float, leader_epoch: int | None = None) -> None:
        """Block until every ISR member holds the records below ``offset`` (the HW reached it) in
        ``leader_epoch`` (None: the current one); raises as ``is_replicated`` does, or
        ``RequestTimedOut`` at ``timeout``."""
        deadline = time.monotonic() + timeout
        with self.lock:
            epoch = self.leader_epoch if leader_epoch is None else leader_epoch
            while not self.is_replicated_to(offset, epoch):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise self.replication_timeout_at(offset)
                self.hw_changed.wait(min(remaining, 0.5))

    def is_replicated(self, info: LeaderAppendInfo, leader_epoch: int) -> bool:
        """Whether every ISR member holds an acks=all batch appended in ``leader_epoch``."""
        return self.is_replicated_to(info.last_offset + 1, leader_epoch)

    def is_replicated_to(self, offset: int, leader_epoch: int) -> bool:
        """Whether every ISR member holds the records below ``offset`` appended in ``leader_epoch``;
        raises once they never will be here (leadership moved) or the ISR shrank below
        min.insync.replicas.

        Leadership is checked first, whatever the high watermark: once this replica stopped
        leading that epoch, a follower's high watermark past ``offset`` may be over the new
        leader's records, written where a truncation removed these (Kafka's
        ``checkEnoughReplicasReachOffset`` answers NOT_LEADER_OR_FOLLOWER off the leader)."""
        with self.lock:
            if self.role != LEADER or self.leader_epoch != leader_epoch:
                raise NotLeaderOrFollowerError(
                    f"{self.topic}-{self.index}: leadership moved (leader epoch {self.leader_epoch}, role "
                    f"{self.role}) before the batch appended in leader epoch {leader_epoch} was acknowledged")
            if self.high_watermark < offset:
                return False
            required = min(self.log.config["min.insync.replicas"], len(self.replicas))
            if len(self.isr) < required:
                raise NotEnoughReplicasAfterAppendError(
                    f"{self.topic}-{self.index}: written, but the ISR shrank to {self.isr} "
                    f"(min.insync.replicas={required})")
            return True

    def replication_timeout(self, info: LeaderAppendInfo) -> RequestTimedOutError:
        return self.replication_timeout_at(info.last_offset + 1)

    def replication_timeout_at(self, offset: int) -> RequestTimedOutError:
        return RequestTimedOutError(
            f"{self.topic}-{self.index}: in-sync replicas {self.isr} did not all reach offset "
            f"{offset - 1} within request.timeout.ms")

    # ------------------------------------------------------------------------------ transactions
    def write_marker(self, producer_id: int, producer_epoch: int, commit: bool,
                     coordinator_epoch: int) -> LeaderAppendInfo:
        """As leader, end a producer's transaction here with a commit or abort marker from the
        coordinator of ``coordinator_epoch`` (its ``__transaction_state`` partition's leader epoch).
        Refused with ``InvalidProducerEpoch`` from an older producer epoch and with
        ``TransactionCoordinatorFenced`` from an older coordinator epoch than the producer's last
        marker here (Kafka's ``ProducerAppendInfo.appendEndTxnMarker``). A marker is an acks=all
        write: refused with ``NotEnoughReplicas`` before it is appended while the ISR is below
        ``min.insync.replicas``, so the coordinator's retries add no marker each."""
        data = marker_batch(producer_id, producer_epoch, commit, coordinator_epoch, self.clock.time_ms())
        headers = validate_batches(data, max_batch_bytes=1 << 20)
        with self.lock:
            self._check_leader()
            self._check_min_isr()
            self.producers.check_marker(producer_id, producer_epoch, coordinator_epoch, self.log.log_end_offset,
                                        f"{self.topic}-{self.index}")
            active = self.log.active.base_offset
            info = self.log.append(data, headers, self.leader_epoch)
            self.producers.end_transaction(headers[0], info.first_offset, commit, coordinator_epoch)
            if self.log.active.base_offset != active:   # a roll snapshots, as append_records does
                self.snapshot_producers()
            self.leader_state.on_leader_append(self.log.log_end_offset, self.clock.time_ms())
            self._advance_hw()
            appended = LeaderAppendInfo(*info, self.leader_epoch)
        self.notifier.bump()
        return appended


def _record_times(data, headers):
    """The batches with the base and max timestamps their records give (a header that says
    otherwise is corrected, as Kafka's ``LogValidator`` sets ``maxTimestamp``): about 12 µs a
    batch, 20-50 µs compressed, since only the timestamps' buffer is read."""
    from broker.records.arrow_body import timestamp_range
    from broker.records.batch import with_timestamp_ranges
    view, pos, ranges = memoryview(data), 0, []
    for h in headers:
        ranges.append(timestamp_range(view[pos + HEADER_SIZE: pos + h.size], h.compression))
        pos += h.size
    if all((h.base_timestamp, h.max_timestamp) == r for h, r in zip(headers, ranges)):
        return data, headers
    return with_timestamp_ranges(data, headers, ranges)


def _first_outside(body, low: int, high: int) -> tuple[int | None, int]:
    """Index and timestamp of a body's first record timestamped outside [low, high] (-1 skipped)."""
    import pyarrow.compute as pc

    from broker.records import arrow_arrays
    from broker.records.arrow_body import decode_produced
    times = decode_produced(body).column(2)
    none, low, high = (arrow_arrays.scalar(max(min(t, LONG_MAX), -LONG_MAX - 1)) for t in (NO_TIMESTAMP, low, high))
    bad = pc.and_(pc.not_equal(times, none), pc.or_(pc.less(times, low), pc.greater(times, high)))
    index = pc.index(bad, True).as_py()
    return (None, -1) if index < 0 else (index, times[index].as_py())
