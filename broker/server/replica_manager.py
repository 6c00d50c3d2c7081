"""The partitions this broker hosts, kept in step with the cluster metadata.

On every metadata change the broker calls :meth:`ReplicaManager.apply_image`: partitions assigned
here are opened (created if new), become leader or follower as the metadata says, and are closed
and deleted when their topic goes away or the replica moved elsewhere. Followers are handed to one
:class:`ReplicaFetcher` per leader broker. A leader's ISR changes (shrink lagging followers,
expand caught-up ones) are sent to the controller by one background thread; the metadata they
produce comes back through :meth:`apply_image` like any other change.

Every hosted partition's high watermark is checkpointed to ``<log.dirs>/replication-offset-checkpoint``
(:mod:`broker.storage.offset_checkpoint`) once the first metadata is applied, every
``replica.high.watermark.checkpoint.interval.ms``, whenever partitions are removed, and at shutdown
(Kafka's ``ReplicaManager.checkpointHighWatermarks``); a partition opened after a restart starts from
it, so consumers see at once what the ISR had confirmed before. Writing at removal means a topic
deleted and created again under the same name never starts from its predecessor's high watermark.

Threading: ``apply_image`` runs on the broker's metadata thread; lookups come from request threads
and take ``self.lock`` only for the dict. ``apply_image`` and ``close`` exclude each other
(``self._apply_lock``): the metadata thread is not joined at shutdown, and a closed partition may
never change role again (its leadership table has no way out of ``closed``).
"""
from __future__ import annotations

import logging
import threading

from broker.clock import Clock
from broker.config import Config, loaded_topic_config, topic_defaults
from broker.errors import KafkaStorageError, NotLeaderOrFollowerError, RiverlogError, UnknownTopicOrPartitionError
from broker.metadata.image import MetadataImage, TopicImage
from broker.partition import FOLLOWER, LEADER, AppendNotifier, Partition
from broker.storage.log_manager import LogManager
from broker.storage.offset_checkpoint import checkpoint_path, read_offset_checkpoint, write_offset_checkpoint

log = logging.getLogger(__name__)


def _log_fault(message: str, error: BaseException) -> None:
    log.error("%s: %r", message, error, exc_info=error)


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
        self._apply_lock = threading.Lock()
        self._closed = False
        self.image = MetadataImage()
        self.on_isr_candidate = None  # set by the broker: schedule an ISR check for a partition
        self.on_fault = _log_fault  # set by the broker: ``on_fault(message, exception)`` counts and logs
        self._hw_path = checkpoint_path(logs.data_dir)
        self._hw_lock = threading.Lock()   # one checkpoint write at a time, the last one after removals
        self._hw_writing = False           # from the first applied image until close
        self._restored_hws = self._read_hw_checkpoint()
        self._unusable_configs: dict[str, dict] = {}   # topic -> the configs last logged as unusable

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

    def follower_fetch_waits(self, request) -> bool:
        """Whether a follower fetch that found nothing still has nothing to answer: every partition
        it asks for is led here in the epoch it names and ends at its fetch offset. Read without
        locks, after the caller took the notifier's sequence: an append or a change of leadership
        after the read bumps it, so a stale answer costs a wake-up, never a missed one."""
        try:
            for topic in request.topics:
                for p in topic.partitions:
                    partition = self.partitions.get((topic.name, p.partition))
                    if partition is None or partition.role != LEADER \
                            or partition.log.log_end_offset != p.fetch_offset:
                        return False
                    if p.HasField("current_leader_epoch") and 0 <= p.current_leader_epoch != partition.leader_epoch:
                        return False
        except Exception:  # noqa: BLE001 - anything odd: let the read find out and answer
            return False
        return True

    def _isr_eligible(self, broker: int, broker_epoch: int) -> bool:
        """Whether a follower on ``broker``, fetching with ``broker_epoch`` (-1: not told), may join
        an ISR (Kafka's ``Partition.isReplicaIsrEligible``): registered, unfenced, not shutting
        down, and fetching from its current registration. Until then a leader neither proposes it
        nor holds its high watermark for it."""
        reg = self.image.brokers.get(broker)
        return (reg is not None and not reg.fenced and not reg.shutting_down
                and (broker_epoch < 0 or reg.broker_epoch == broker_epoch))

    def topic_config(self, topic: TopicImage) -> Config:
        """The topic's config as this broker can use it (:func:`~broker.config.loaded_topic_config`);
        what it cannot use is logged once per change of the topic's configs."""
        config, problems = loaded_topic_config(topic.configs, self.topic_defaults)
        if problems and self._unusable_configs.get(topic.name) != topic.configs:
            self._unusable_configs[topic.name] = dict(topic.configs)
            for e in problems:
                log.warning("topic '%s': %s; this broker uses its default instead", topic.name, e)
        return config

    # ------------------------------------------------------------------------------ metadata
    def remove_stale_dirs(self, image: MetadataImage) -> None:
        """At start-up: remove partition directories whose topic is gone or no longer assigned here.

        A directory that cannot be removed is reported to ``on_fault`` and left for the next start.
        """
        wanted = {(t.name, i): t.topic_id for t in image.topics.values()
                  for i, p in enumerate(t.partitions) if self.node_id in p.replicas}
        for (topic, index), topic_id in self.logs.existing().items():
            if wanted.get((topic, index)) != topic_id and not topic.startswith("__cluster_metadata"):
                log.info("removing %s-%d: not assigned to this broker", topic, index)
                try:
                    self.logs.remove_dir(topic, index, topic_id)
                except Exception as e:  # noqa: BLE001 - reported; the other directories still go
                    self.on_fault(f"could not remove the directory of {topic}-{index}", e)

    def apply_image(self, image: MetadataImage) -> None:
        """Bring hosted partitions in line with ``image`` (already a private copy for this thread).

        A partition that fails to open, change role or be removed is reported to ``on_fault``
        (Kafka logs it and counts a metadata apply error) and does not hold up the others; one that
        failed to open is tried again on the next change. Nothing is applied once closed.
        """
        with self._apply_lock:
            if not self._closed:
                self._apply_image(image)
                if not self._hw_writing:
                    # As Kafka's checkpoint thread, start once the partitions are opened, so the
                    # checkpoint read at start-up is not replaced before they took their values.
                    self._hw_writing = True
                    self._checkpoint_or_report("after the first metadata")

    def _apply_image(self, image: MetadataImage) -> None:
        self.image = image
        seen = set()
        for topic in image.topics.values():
            try:
                config = self.topic_config(topic)
            except Exception as e:  # noqa: BLE001 - reported; its hosted partitions stay as they are
                self.on_fault(f"topic '{topic.name}' has unusable configs", e)
                seen.update((topic.name, i) for i, state in enumerate(topic.partitions)
                            if self.node_id in state.replicas)
                continue
            for index, state in enumerate(topic.partitions):
                if self.node_id not in state.replicas:
                    continue
                key = (topic.name, index)
                seen.add(key)
                try:
                    self._apply_partition(key, topic, index, state, config)
                except Exception as e:  # noqa: BLE001 - reported; the other partitions still apply
                    self.on_fault(f"could not apply the metadata of {topic.name}-{index}", e)
        gone = [k for k in self.partitions if k not in seen]
        for key in gone:
            try:
                self._remove(key)
            except Exception as e:  # noqa: BLE001
                self.on_fault(f"could not remove {key[0]}-{key[1]}", e)
        if gone:
            self._checkpoint_or_report("after removing partitions")

    def _apply_partition(self, key, topic: TopicImage, index: int, state, config: Config) -> None:
        partition = self.partitions.get(key)
        if partition is not None and partition.topic_id != topic.topic_id:
            self._remove(key)
            self._checkpoint_or_report("after removing a re-created topic's old partition")
            partition = None
        if partition is None:
            partition = self._open(topic, index, config)
        elif partition.log.config != config:
            partition.set_config(config)
        self._apply_state(partition, state)

    def _open(self, topic: TopicImage, index: int, config: Config) -> Partition:
        log_ = self.logs.open_log(topic.name, index, topic.topic_id, config)
        # Taken once: a partition opened again later (re-created topic) never gets this value.
        restored = self._restored_hws.pop((topic.name, index), None)
        partition = Partition(topic.name, index, topic.topic_id, log_, self.notifier, self.node_id, self.clock,
                              high_watermark=restored)
        partition.on_isr_candidate = self.on_isr_candidate
        partition.replica_lag_time_max_ms = self.config["replica.lag.time.max.ms"]
        partition.replica_eligible = self._isr_eligible
        with self.lock:
            self.partitions[(topic.name, index)] = partition
        return partition

    def _apply_state(self, partition: Partition, state) -> None:
        if state.leader == self.node_id:
            if partition.role != LEADER or partition.leader_epoch != state.leader_epoch \
                    or partition.partition_epoch != state.partition_epoch:
                self.fetchers.remove(partition)
                partition.make_leader(state.leader_epoch, state.partition_epoch, state.replicas, state.isr)
                self.notifier.bump()
        elif partition.role != FOLLOWER or partition.leader_epoch != state.leader_epoch \
                or partition.leader_id != state.leader or partition.partition_epoch != state.partition_epoch:
            changed = partition.make_follower(state.leader, state.leader_epoch, state.partition_epoch,
                                              state.replicas, state.isr)
            if changed:
                self.fetchers.remove(partition)
                if state.leader >= 0:
                    self.fetchers.add(partition, state.leader)
                self.notifier.bump()  # requests waiting on it as leader answer NotLeaderOrFollower now

    def _remove(self, key) -> None:
        with self.lock:
            partition = self.partitions.pop(key, None)
        if partition is None:
            return
        self.fetchers.remove(partition)
        partition.close_for_removal()
        self.notifier.bump()
        self.logs.remove_dir(partition.topic, partition.index, partition.topic_id)

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
            except Exception as e:  # noqa: BLE001 - logged; the other partitions' retention still runs
                log.warning("retention of %s-%d failed: %r", partition.topic, partition.index, e,
                            exc_info=not isinstance(e, RiverlogError))
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

    # ------------------------------------------------------------------------------ high-watermark checkpoint
    def _read_hw_checkpoint(self) -> dict[tuple[str, int], int]:
        """The checkpoint left by the previous run. One that does not parse is reported and set
        aside: every partition then starts at its log start, as with no checkpoint, and waits for its
        ISR (Kafka would take the log directory offline; this is safe, only slower to show records)."""
        try:
            return read_offset_checkpoint(self._hw_path)
        except KafkaStorageError as e:
            log.error("%s; high watermarks start at each partition's log start offset until the in-sync "
                      "replicas confirm them again", e)
            return {}

    def checkpoint_high_watermarks(self) -> None:
        """Write every hosted partition's high watermark (leaders' and followers'), atomically.
        Nothing before the first metadata is applied, nor after close (which writes the last one)."""
        with self._hw_lock:
            if self._hw_writing:
                self._write_hws()

    def _write_hws(self) -> None:
        with self.lock:
            hosted = list(self.partitions.values())
        write_offset_checkpoint(self._hw_path, {(p.topic, p.index): p.high_watermark for p in hosted})

    def _checkpoint_or_report(self, when: str) -> None:
        try:
            self.checkpoint_high_watermarks()
        except Exception as e:  # noqa: BLE001 - reported; the next interval writes it again
            self.on_fault(f"could not checkpoint the high watermarks {when}", e)

    def close(self) -> None:
        """Stop fetching, close every partition, and checkpoint the high watermarks they ended with."""
        with self._apply_lock:
            self._closed = True
        self.fetchers.close()
        for partition in list(self.partitions.values()):
            partition.close()
        with self._hw_lock:
            if self._hw_writing:
                self._hw_writing = False
                try:
                    self._write_hws()
                except Exception as e:  # noqa: BLE001 - the logs are closed; the next start is slower
                    log.error("could not checkpoint the high watermarks at shutdown: %r", e)
