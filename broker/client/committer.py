"""A consumer's offset commits and reads of committed offsets, through its group's coordinator.

Kept apart from fetching and from membership: a commit carries the member's id and epoch as
membership knows them at the moment it is sent (``member`` is asked again on every retry of a
retriable error, such as a coordinator that moved). A commit refused with
``StaleMemberEpochError`` fails, as in Kafka's ``CommitRequestManager`` (``CommitFailedException``):
the member's epoch moved, so some of the partitions may be another member's by now, and committing
them again under the new epoch could move that member's position. Only the automatic commit before
revocation (``retry_stale_epoch=True``) sends it again with the epoch the next heartbeat brought,
since it commits only partitions the member still owns. ``enable.auto.commit`` commits
only positions that moved since the last commit, every ``auto.commit.interval.ms`` by the
``Clock`` passed in; an argument-less ``commit()`` likewise leaves out what the group already holds
(:meth:`OffsetCommitter.uncommitted`). What the coordinator answers to OffsetFetch counts as committed;
an OffsetFetch names the member too, and is sent again after a stale epoch (:meth:`OffsetCommitter.committed_offsets`).

Synchronous commits run on the caller's thread; asynchronous ones on one background thread, in the
order they were made. Their outcomes are queued for ``on_commit(err, partitions)``, which
:meth:`OffsetCommitter.serve` runs on the application's thread (the consumer calls it from
``poll()``, ``consume()`` and ``close()``), as confluent-kafka serves it: ``err`` a
:class:`~broker.errors.KafkaError` or None, ``partitions`` the committed TopicPartitions, each with
its own ``error``. Commits reach the coordinator in the order they were made, as over Kafka's single
coordinator connection: a synchronous commit first waits for the asynchronous ones made before it,
so an automatic commit of an older position cannot land after the commit on revocation and move the
group back.
"""
from __future__ import annotations

import collections
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable

from broker.client.coordinator import CoordinatorClient
from broker.client.message import TopicPartition, _rebuild_topic_partition
from broker.clock import Clock
from broker.errors import KafkaError, KafkaTimeoutError, RiverlogError, StaleMemberEpochError, error_for_code
from broker.proto import riverlog_pb2 as pb

log = logging.getLogger(__name__)


class OffsetCommitter:
    def __init__(self, coordinator: CoordinatorClient, config, group_id: str,
                 member: Callable[[], tuple[str, int]], clock: Clock, wake: Callable[[], None] = lambda: None):
        self.coordinator = coordinator
        self.config = config
        self.group_id = group_id
        self._member = member  # () -> (member id, member epoch); ("", -1) outside a group
        self.clock = clock
        self._lock = threading.Lock()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self._last_auto_commit = clock.monotonic()
        self._committed: dict[tuple[str, int], int] = {}
        self._in_flight: list[concurrent.futures.Future] = []  # asynchronous commits not yet answered
        self._outcomes: collections.deque = collections.deque()  # (err, partitions) waiting for on_commit
        self._wake = wake  # an outcome was queued: poll() may serve it now

    def commit_sync(self, tps: list[TopicPartition], timeout: float,
                    retry_stale_epoch: bool = False) -> list[TopicPartition]:
        """Commit ``tps`` after the asynchronous commits made before it; retriable errors find the
        coordinator again until ``timeout``. A stale member epoch fails the commit unless
        ``retry_stale_epoch`` (the automatic commit before revocation)."""
        if not tps:
            return []
        deadline = time.monotonic() + timeout
        with self._lock:
            earlier = list(self._in_flight)
        concurrent.futures.wait(earlier, timeout)
        error, _ = self._send(tps, max(0.1, deadline - time.monotonic()), retry_stale_epoch)
        if error is not None:
            raise error
        return tps

    def _send(self, tps: list[TopicPartition], timeout: float,
              retry_stale_epoch: bool = False) -> tuple[RiverlogError | None, dict]:
        """Commit until done or a non-retriable error: (the first partition's error or None,
        {(topic, partition): error} of the partitions that failed). ``StaleMemberEpochError`` counts
        as non-retriable here unless ``retry_stale_epoch`` (see the module's docstring)."""
        member_id, epoch = self._member()
        by_topic: dict[str, list] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(pb.CommitPartition(
                partition=tp.partition, offset=tp.offset, metadata=tp.metadata or "",
                leader_epoch=-1 if tp.leader_epoch is None else tp.leader_epoch))
        request = pb.OffsetCommitRequest(group_id=self.group_id, member_id=member_id, member_epoch=epoch,
                                         topics=[pb.CommitTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
        deadline = time.monotonic() + timeout
        while True:
            response = self.coordinator.call("OffsetCommit", request, max(0.1, deadline - time.monotonic()))
            errors = {(r.topic, r.partition): error_for_code(r.error_code)(r.error_message)
                      for r in response.results if r.error_code}
            if not errors:
                with self._lock:
                    for tp in tps:
                        self._committed[(tp.topic, tp.partition)] = tp.offset
                return None, {}
            error = next(iter(errors.values()))
            stale = any(isinstance(e, StaleMemberEpochError) for e in errors.values())
            if stale and not retry_stale_epoch:
                error = next(e for e in errors.values() if isinstance(e, StaleMemberEpochError))
                return error, errors
            if not error.retriable or time.monotonic() >= deadline:
                return error, errors
            self.coordinator.forget()
            time.sleep(self.config["retry.backoff.ms"] / 1000.0)
            request.member_id, request.member_epoch = self._member()

    def uncommitted(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        """The offsets of ``tps`` that differ from what this consumer knows to be committed (by its
        commits, or read from the coordinator), as librdkafka's
        ``rd_kafka_topic_partition_list_set_offsets`` leaves out a partition already committed."""
        with self._lock:
            return [tp for tp in tps if self._committed.get((tp.topic, tp.partition)) != tp.offset]

    def report(self, error: KafkaError, partitions: list[TopicPartition]) -> None:
        """Queue an outcome for ``on_commit`` that never reached the coordinator (``_NO_OFFSET``)."""
        if self.config["on_commit"] is not None:
            with self._lock:
                self._outcomes.append((error, partitions))
            self._wake()

    def commit_async(self, tps: list[TopicPartition]) -> None:
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="riverlog-commit")

        def run():
            try:
                error, errors = self._send(tps, self.config["request.timeout.ms"] / 1000.0)
            except RiverlogError as e:  # the coordinator did not answer: every partition failed
                error, errors = e, {(tp.topic, tp.partition): e for tp in tps}
            if error is not None:
                log.debug("asynchronous commit failed: %r", error)
            if self.config["on_commit"] is not None:
                with self._lock:
                    self._outcomes.append((KafkaError.of(error), [_with_error(tp, errors.get((tp.topic, tp.partition)))
                                                                  for tp in tps]))
                self._wake()

        with self._lock:
            self._in_flight = [f for f in self._in_flight if not f.done()]
            self._in_flight.append(self._executor.submit(run))

    def serve(self) -> int:
        """Run ``on_commit(err, partitions)`` for each asynchronous commit answered since the last
        call, on the caller's (the application's) thread; returns how many ran."""
        served = 0
        while True:
            with self._lock:
                if not self._outcomes:
                    return served
                error, partitions = self._outcomes.popleft()
            self.config["on_commit"](error, partitions)
            served += 1

    def auto_commit_due(self) -> bool:
        """Whether ``auto.commit.interval.ms`` has passed since the last automatic commit (and
        starts the next interval when it has)."""
        if not self.config["enable.auto.commit"]:
            return False
        now = self.clock.monotonic()
        if (now - self._last_auto_commit) * 1000 < self.config["auto.commit.interval.ms"]:
            return False
        self._last_auto_commit = now
        return True

    def commit_moved(self, positions: list[TopicPartition]) -> None:
        """Commit, in the background, the positions that differ from what was last committed."""
        moved = self.uncommitted(positions)
        if moved:
            self.commit_async(moved)

    def committed_offsets(self, partitions, timeout: float, with_metadata: bool = False,
                          wait_stable: bool = True, with_epoch: bool = False) -> dict:
        """{(topic, partition): offset} the group has committed; ``with_epoch``: (offset, the leader
        epoch committed with it or -1), a start position a consumer validates (KIP-320);
        ``with_metadata``: (offset, metadata, leader epoch).

        The request names the member (id and epoch) while it is in the group with an epoch > 0,
        as Kafka's ``CommitRequestManager`` (OffsetFetch v9, KIP-848); before that (joining, at
        epoch 0), after it left, and for an ``assign()`` consumer it names none and is always
        answered. ``STALE_MEMBER_EPOCH`` (the epoch moved on while the request was under way) is
        sent again after ``retry.backoff.ms`` with the epoch the next heartbeat brought, while the
        member is still in the group, until ``timeout`` (then ``KafkaTimeoutError``);
        ``UNKNOWN_MEMBER_ID`` (the member was removed) fails at once: the membership's heartbeat
        finds that out too and joins again.

        A ``read_committed`` consumer asks for stable offsets (KIP-447, as librdkafka sets
        ``require_stable_offsets`` for ``isolation.level=read_committed`` and Kafka's Java consumer
        always does): while a transaction with offsets of a partition is open, the coordinator
        answers ``UNSTABLE_OFFSET_COMMIT`` for it, and the fetch is sent again after
        ``retry.backoff.ms`` until it ends (librdkafka's ``retry_unstable``). Reading the offset
        before the transaction commits would start the partition's new owner at the old offset:
        the records the transaction processed would be processed again. Past ``timeout`` it fails
        with ``KafkaTimeoutError`` (``_TIMED_OUT``, what librdkafka's ``committed()`` returns).
        ``wait_stable`` False fails at the first unstable or stale-epoch answer instead, for a
        caller that asks again later rather than block (the group step inside ``poll()``:
        librdkafka waits in the background, never in the application's ``poll()``, and serves a
        stale-epoch assignment again after the next heartbeat)."""
        by_topic: dict[str, list[int]] = {}
        for t, p in sorted(partitions):
            by_topic.setdefault(t, []).append(p)
        stable = self.config.get("isolation.level", "read_committed") == "read_committed"
        request = pb.OffsetFetchRequest(group_id=self.group_id, require_stable=stable, partitions=[
            pb.GroupPartitions(topic=t, partitions=ps) for t, ps in by_topic.items()])
        deadline = time.monotonic() + timeout
        while True:
            self._name_member(request)
            response = self.coordinator.call("OffsetFetch", request, max(0.1, deadline - time.monotonic()))
            if response.error_code:
                error = error_for_code(response.error_code)(response.error_message)
                if not (isinstance(error, StaleMemberEpochError) and wait_stable and self._in_group()):
                    raise error
                if time.monotonic() >= deadline:
                    raise KafkaTimeoutError(f"could not read committed offsets within {timeout:g}s: the member "
                                            f"epoch kept moving (STALE_MEMBER_EPOCH: {error.message})")
                self._backoff(deadline)
                continue
            unstable = [o for o in response.offsets if o.error_code == KafkaError.UNSTABLE_OFFSET_COMMIT]
            failed = next((o for o in response.offsets
                           if o.error_code not in (0, KafkaError.UNSTABLE_OFFSET_COMMIT)), None)
            if failed is not None:
                raise error_for_code(failed.error_code)(failed.error_message)
            if not unstable:
                break
            if not wait_stable or time.monotonic() >= deadline:
                names = ", ".join(f"{o.topic} [{o.partition}]" for o in unstable)
                raise KafkaTimeoutError(f"committed offsets of {names} are still pending in an open transaction "
                                        f"after {timeout:g}s (UNSTABLE_OFFSET_COMMIT): wait for it to end")
            self._backoff(deadline)
        with self._lock:
            for o in response.offsets:
                if o.offset >= 0:
                    self._committed[(o.topic, o.partition)] = o.offset
        if with_metadata:
            return {(o.topic, o.partition): (o.offset, o.metadata, o.leader_epoch) for o in response.offsets}
        if with_epoch:
            return {(o.topic, o.partition): (o.offset, o.leader_epoch) for o in response.offsets}
        return {(o.topic, o.partition): o.offset for o in response.offsets}

    def _in_group(self) -> bool:
        """Whether the member is in its group with an epoch (Kafka's ``MemberInfo`` with an epoch)."""
        member_id, epoch = self._member()
        return bool(member_id) and epoch > 0

    def _name_member(self, request: pb.OffsetFetchRequest) -> None:
        """Put the member's current id and epoch on ``request``, or none outside the group."""
        member_id, epoch = self._member()
        if member_id and epoch > 0:
            request.member_id, request.member_epoch = member_id, epoch
        else:
            request.member_id = ""
            request.ClearField("member_epoch")

    def _backoff(self, deadline: float) -> None:
        time.sleep(min(self.config["retry.backoff.ms"] / 1000.0, max(0.0, deadline - time.monotonic())))

    def close(self) -> None:
        """Wait for asynchronous commits already made."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)


def _with_error(tp: TopicPartition, error: RiverlogError | None) -> TopicPartition:
    """A copy of ``tp`` whose ``error`` is ``error`` as a KafkaError (TopicPartition.error is read-only)."""
    return _rebuild_topic_partition(tp.topic, tp.partition, tp.offset, tp.metadata, tp.leader_epoch,
                                    KafkaError.of(error))
