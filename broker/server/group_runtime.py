"""Group coordination on this broker: the ``__consumer_offsets`` partitions it leads (see
:mod:`broker.server.coordinator_runtime`), and expiry of members whose session ran out."""
from __future__ import annotations

import logging
import threading
import time

from broker.errors import CoordinatorLoadInProgressError, NotCoordinatorError, RiverlogError
from broker.group.coordinator import OFFSETS_TOPIC, GroupShard
from broker.server.coordinator_runtime import CoordinatorRuntime

log = logging.getLogger(__name__)

_LOAD_POLL_S = 0.01  # how often ListGroups looks again at partitions being loaded


class GroupRuntime(CoordinatorRuntime):
    topic = OFFSETS_TOPIC
    what = "group"
    thread_name = "riverlog-groups"

    def __init__(self, broker):
        super().__init__(broker)
        self._deleted: set[str] = set()
        self._deleted_lock = threading.Lock()
        self._retention_checked: dict[int, int] = {}   # shard -> when its offsets' retention was last checked
        broker.topic_deletion_listeners.append(self._topics_deleted)

    def read_all(self, fn) -> list:
        """``fn(shard)`` for every ``__consumer_offsets`` partition this broker coordinates, each
        under its lock once its state is replicated, as Kafka's ``scheduleReadAllOperation`` reads
        every shard at its last committed offset (ListGroups). A partition this broker leads but
        has not finished loading, or is about to lead (:meth:`_to_load`), waited for up to
        ``offsets.commit.timeout.ms``, or whose state is not replicated yet, fails the whole read
        with ``CoordinatorLoadInProgress`` (retriable), as Kafka's ListGroups answers, instead of
        leaving its groups out of the answer; one it has just stopped leading is skipped (its new
        coordinator lists them), as Kafka skips ``NOT_COORDINATOR``."""
        deadline = time.monotonic() + self.config["offsets.commit.timeout.ms"] / 1000.0
        while True:
            topic = self.broker.image.topics.get(self.topic)
            if topic is None:
                return []
            with self._lock:
                shards, loading = dict(self._shards), set(self._loading)
            waiting = sorted(i for i, p in enumerate(topic.partitions)
                             if i not in shards and (i in loading or self._to_load(p)))
            if not waiting:
                break
            if time.monotonic() >= deadline or self._stopped.wait(_LOAD_POLL_S):
                raise CoordinatorLoadInProgressError(
                    f"loading the groups of {self.topic} partition(s) {waiting}: list the groups again shortly")
        out = []
        for _, loaded in sorted(shards.items()):
            try:
                self._await_replicated(loaded)
            except NotCoordinatorError:
                continue
            with loaded.lock:
                if not loaded.live or not loaded.partition.is_leader:
                    continue
                if loaded.partition.high_watermark < loaded.end:
                    raise self._not_replicated(loaded)
                out.append(fn(loaded.shard))
        return out

    def _to_load(self, partition) -> bool:
        """Whether this broker leads ``partition``, or will as soon as the controller elects a
        leader: leaderless with this broker in its ISR, as a restarted broker finds its partitions
        when it starts serving (the controller elects it right after unfencing it, where Kafka's
        does both at once). Not while it shuts down: leadership then moves away from it."""
        node = self.broker.node_id
        if partition.leader == node:
            return True
        return partition.leader < 0 and node in partition.isr and not self.broker.shutting_down

    def _topics_deleted(self, names: set[str]) -> None:
        """From the metadata thread: topics a new image no longer has (or has under a new id)."""
        with self._deleted_lock:
            self._deleted |= names

    def new_shard(self, partition: int) -> GroupShard:
        return GroupShard(partition)

    def topic_settings(self) -> dict:
        return {"num_partitions": self.config["offsets.topic.num.partitions"],
                "replication_factor": self.config["offsets.topic.replication.factor"],
                "configs": {"cleanup.policy": "compact",
                            "segment.bytes": str(self.config["offsets.topic.segment.bytes"])}}

    def _tick(self) -> None:
        """Before the timers: the offsets of topics deleted (or deleted and created again) since
        the last tick go from every group this broker coordinates (Kafka's onPartitionsDeleted)."""
        with self._deleted_lock:
            gone, self._deleted = self._deleted, set()
        if gone:
            for loaded in self.loaded_shards():
                with loaded.lock:
                    records = loaded.shard.delete_topics(gone) if loaded.live else []
                    if records:
                        try:
                            self.write(loaded, records)
                        except RiverlogError as e:
                            log.warning("could not drop the offsets of deleted topics %s: %r", sorted(gone), e)
                            with self._deleted_lock:
                                self._deleted |= gone       # tried again at the next tick
        super()._tick()

    def tick(self, loaded, now_ms: int) -> None:
        records = loaded.shard.expire(self.topic_sizes(), now_ms)
        partition = loaded.shard.partition
        if now_ms - self._retention_checked.get(partition, 0) >= self.config["offsets.retention.check.interval.ms"]:
            self._retention_checked[partition] = now_ms
            records += loaded.shard.expire_offsets(now_ms, self.config["offsets.retention.minutes"] * 60_000)
        if records:
            try:
                self.write(loaded, records)
            except RiverlogError as e:
                log.warning("could not record expired group members or offsets: %r", e)
