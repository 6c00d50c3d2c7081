"""The partitions this broker hosts, kept in step with the cluster metadata.

On every metadata change the broker calls :meth:`ReplicaManager.apply_image`: partitions assigned
here are opened (created if new), become leader or follower as the metadata says, and are closed
and deleted when their topic goes away or the replica moved elsewhere. Followers are handed to one
:class:`ReplicaFetcher` per leader broker. A leader's ISR changes (shrink lagging followers,
expand caught-up ones) are sent to the controller by one background thread; the metadata they
produce comes back through :meth:`apply_image` like any other change.

Threading: ``apply_image`` runs on the broker's metadata thread; lookups come from request threads
and take ``self.lock`` only for the dict.
"""
from __future__ import annotations

import logging
import threading

from broker.clock import Clock
from broker.config import TOPIC_CONFIG, Config, topic_defaults
from broker.errors import NotLeaderOrFollowerError, RiverlogError, UnknownTopicOrPartitionError
from broker.metadata.image import MetadataImage, TopicImage
from broker.partition import AppendNotifier, Partition
from broker.storage.log_manager import LogManager, partition_dir_name

log = logging.getLogger(__name__)


class ReplicaManager:
    def __init__(self, config: Config, clock: Clock, logs: LogManager, fetchers, alter_isr):
        """``fetchers``: a ReplicaFetcherManager; ``alter_isr(partition, new_isr)``: asks the controller."""
        self.config = config
        self.clock = clock
        self.node_id = config["node.id"]
        self.logs = logs
        self.fetchers = fetchers
        self.alter_isr = alter_isr
        self.topic_defaults = topic_defaults(config)
        self.notifier = AppendNotifier()
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.lock = threading.RLock()
        self.image = MetadataImage()
        self.on_isr_candidate = None  # set by the broker: schedule an ISR check for a partition

    # ------------------------------------------------------------------------------ lookups
    def partition(self, topic: str, index: int) -> Partition:
        found = self.partitions.get((topic, index))
        if found is not None:
            return found
        t = self.image.topics.get(topic)
        if t is None:
            raise UnknownTopicOrPartitionError(f"topic '{topic}' does not exist")
        if not 0 <= index < t.num_partitions:
            raise UnknownTopicOrPartitionError(
                f"topic '{topic}' has {t.num_partitions} partition(s); partition {index} does not exist")
        leader = t.partitions[index].leader
        raise NotLeaderOrFollowerError(
            f"broker {self.node_id} does not host {topic}-{index} (leader: {leader}); refresh metadata")

    def topic_config(self, topic: TopicImage) -> Config:
        return TOPIC_CONFIG.parse(topic.configs, defaults=self.topic_defaults)

    # ------------------------------------------------------------------------------ metadata
    def remove_stale_dirs(self, image: MetadataImage) -> None:
        """At start-up: remove partition directories whose topic is gone or no longer assigned here."""
        wanted = {partition_dir_name(t.name, i): t.topic_id for t in image.topics.values()
                  for i, p in enumerate(t.partitions) if self.node_id in p.replicas}
        for dir_name, topic_id in self.logs.existing().items():
            if wanted.get(dir_name) != topic_id and not dir_name.startswith("__cluster_metadata"):
                log.info("removing %s: not assigned to this broker", dir_name)
                self.logs.remove_dir(dir_name, topic_id)

    def apply_image(self, image: MetadataImage) -> None:
        """Bring hosted partitions in line with ``image`` (already a private copy for this thread)."""
        self.image = image
        seen = set()
        for topic in image.topics.values():
            config = self.topic_config(topic)
            for index, state in enumerate(topic.partitions):
                if self.node_id not in state.replicas:
                    continue
                key = (topic.name, index)
                seen.add(key)
                partition = self.partitions.get(key)
                if partition is not None and partition.topic_id != topic.topic_id:
                    self._remove(key)
                    partition = None
                if partition is None:
                    partition = self._open(topic, index, config)
                elif partition.log.config != config:
                    partition.set_config(config)
                self._apply_state(partition, state)
        for key in [k for k in self.partitions if k not in seen]:
            self._remove(key)

    def _open(self, topic: TopicImage, index: int, config: Config) -> Partition:
        log_ = self.logs.open_log(topic.name, index, topic.topic_id, config)
        partition = Partition(topic.name, index, topic.topic_id, log_, self.notifier, self.node_id, self.clock)
        partition.on_isr_candidate = self.on_isr_candidate
        with self.lock:
            self.partitions[(topic.name, index)] = partition
        return partition

    def _apply_state(self, partition: Partition, state) -> None:
        if state.leader == self.node_id:
            if partition.role != "leader" or partition.leader_epoch != state.leader_epoch \
                    or partition.partition_epoch != state.partition_epoch:
                self.fetchers.remove(partition)
                partition.make_leader(state.leader_epoch, state.partition_epoch, state.replicas, state.isr)
                self.notifier.bump()
        elif partition.role != "follower" or partition.leader_epoch != state.leader_epoch \
                or partition.leader_id != state.leader or partition.partition_epoch != state.partition_epoch:
            changed = partition.make_follower(state.leader, state.leader_epoch, state.partition_epoch,
                                              state.replicas, state.isr)
            if changed:
                self.fetchers.remove(partition)
                if state.leader >= 0:
                    self.fetchers.add(partition, state.leader)

    def _remove(self, key) -> None:
        with self.lock:
            partition = self.partitions.pop(key, None)
        if partition is None:
            return
        self.fetchers.remove(partition)
        with partition.lock:
            partition.role = "follower"
            partition.hw_changed.notify_all()
            partition.log.close_without_flush()
        self.logs.remove_dir(partition_dir_name(partition.topic, partition.index), partition.topic_id)

    # ------------------------------------------------------------------------------ upkeep
    def check_isr(self, only: Partition | None = None) -> None:
        """Shrink or expand the ISR of partitions led here (periodically, and when a follower
        catches up)."""
        now, lag = self.clock.time_ms(), self.config["replica.lag.time.max.ms"]
        for partition in [only] if only is not None else list(self.partitions.values()):
            try:
                proposal = partition.propose_isr_change(now, lag)
            except RiverlogError:
                continue
            if proposal is not None:
                self.alter_isr(partition, *proposal)

    def flush_due(self) -> None:
        for partition in list(self.partitions.values()):
            partition.maybe_flush()

    def hosted(self) -> list[Partition]:
        return list(self.partitions.values())

    def apply_retention(self) -> None:
        """Remove old segments of every hosted partition, leader or follower (as Kafka does)."""
        now = self.clock.time_ms()
        for partition in self.hosted():
            try:
                result = partition.apply_retention(now)
            except RiverlogError as e:
                log.warning("retention of %s-%d failed: %r", partition.topic, partition.index, e)
                continue
            if result.segments:
                log.info("%s-%d: removed %d segment(s), %d bytes (%s); log start offset now %d",
                         partition.topic, partition.index, result.segments, result.bytes,
                         ", ".join(sorted(set(result.reasons))), result.log_start_offset)

    def expire_producers(self, expiration_ms: int) -> None:
        """Forget idle idempotent producers in every hosted partition (``producer.id.expiration.ms``)."""
        now = self.clock.time_ms()
        for partition in self.hosted():
            gone = partition.expire_producers(now, expiration_ms)
            if gone:
                log.info("%s-%d: forgot %d idle producer(s)", partition.topic, partition.index, len(gone))

    def close(self) -> None:
        self.fetchers.close()
        for partition in list(self.partitions.values()):
            partition.close()
