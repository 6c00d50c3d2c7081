"""The broker's state: its configuration, metadata and the partitions it hosts.

Topic lifecycle changes are written to the metadata log first and applied to the hosted
partitions after, so a crash in between is repaired at the next start (missing logs are created,
logs of topics that no longer exist are removed).

Threading: ``self.metadata.lock`` serialises topic and config changes; partitions have their own
locks, so produce and fetch never wait on metadata changes of other topics.
"""
from __future__ import annotations

import logging
import uuid

from broker.clock import SYSTEM_CLOCK, Clock
from broker.config import TOPIC_CONFIG, Config, topic_defaults
from broker.errors import (InvalidPartitionsError, InvalidReplicationFactorError, PolicyViolationError,
                           TopicAlreadyExistsError, UnknownTopicOrPartitionError)
from broker.metadata.image import TopicImage, validate_topic_name
from broker.metadata.store import METADATA_TOPIC, MetadataStore
from broker.partition import AppendNotifier, Partition
from broker.storage.log_manager import LogManager, partition_dir_name

log = logging.getLogger(__name__)

MAX_PARTITIONS = 10_000


class Broker:
    def __init__(self, config: Config, clock: Clock = SYSTEM_CLOCK):
        self.config = config
        self.clock = clock
        self.node_id = config["node.id"]
        self.topic_defaults = topic_defaults(config)
        self.logs = LogManager(config["log.dirs"], clock)
        self.metadata = MetadataStore(config["log.dirs"], clock, self.logs.clean_shutdown)
        self.notifier = AppendNotifier()
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.cluster_id = self._cluster_id()
        self._load_partitions()

    def _cluster_id(self) -> str:
        with self.metadata.lock:
            cid = self.metadata.image.broker_configs.get("cluster.id")
            if cid is None:
                cid = uuid.uuid4().hex
                self.metadata.append([{"type": "config", "resource": "broker", "name": "",
                                       "key": "cluster.id", "value": cid}])
            return cid

    def _load_partitions(self) -> None:
        image = self.metadata.image
        wanted = {partition_dir_name(t.name, p): t.topic_id
                  for t in image.topics.values() for p in range(t.num_partitions)}
        for dir_name, topic_id in self.logs.existing().items():
            if wanted.get(dir_name) != topic_id and not dir_name.startswith(METADATA_TOPIC):
                log.info("removing %s: its topic no longer exists", dir_name)
                self.logs.remove_dir(dir_name, topic_id)
        for topic in image.topics.values():
            self._open_partitions(topic)

    def _open_partitions(self, topic: TopicImage) -> None:
        config = self.topic_config(topic)
        for p in range(topic.num_partitions):
            log_ = self.logs.open_log(topic.name, p, topic.topic_id, config)
            self.partitions[(topic.name, p)] = Partition(topic.name, p, topic.topic_id, log_, self.notifier)

    def topic_config(self, topic: TopicImage) -> Config:
        return TOPIC_CONFIG.parse(topic.configs, defaults=self.topic_defaults)

    # ------------------------------------------------------------------------------- lookups
    def partition(self, topic: str, index: int) -> Partition:
        found = self.partitions.get((topic, index))
        if found is None:
            t = self.metadata.image.topics.get(topic)
            if t is None:
                raise UnknownTopicOrPartitionError(f"topic '{topic}' does not exist")
            raise UnknownTopicOrPartitionError(
                f"topic '{topic}' has {t.num_partitions} partition(s); partition {index} does not exist")
        return found

    def topic(self, name: str) -> TopicImage:
        found = self.metadata.image.topics.get(name)
        if found is None:
            raise UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
        return found

    # ------------------------------------------------------------------------------- changes
    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     configs: dict[str, str], validate_only: bool = False) -> None:
        validate_topic_name(name)
        if name.startswith("__"):
            raise PolicyViolationError(f"topic names starting with '__' are reserved for internal topics")
        partitions = self.config["num.partitions"] if num_partitions in (-1, 0) else num_partitions
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidPartitionsError(f"num_partitions must be between 1 and {MAX_PARTITIONS}, got {partitions}")
        factor = self.config["default.replication.factor"] if replication_factor in (-1, 0) else replication_factor
        if factor < 1 or factor > 1:
            raise InvalidReplicationFactorError(
                f"replication factor {factor} is larger than the 1 available broker(s)" if factor > 1
                else f"replication factor must be at least 1, got {factor}")
        TOPIC_CONFIG.parse(configs, defaults=self.topic_defaults)
        with self.metadata.lock:
            if name in self.metadata.image.topics:
                raise TopicAlreadyExistsError(f"topic '{name}' already exists")
            if validate_only:
                return
            topic_id = uuid.uuid4().hex
            records = [{"type": "topic", "name": name, "topic_id": topic_id,
                        "replicas": [[self.node_id]] * partitions}]
            records += [{"type": "config", "resource": "topic", "name": name, "key": k, "value": str(v)}
                        for k, v in sorted(configs.items())]
            self.metadata.append(records)
            self._open_partitions(self.metadata.image.topics[name])

    def delete_topic(self, name: str) -> None:
        if not self.config["delete.topic.enable"]:
            raise PolicyViolationError("topic deletion is disabled (delete.topic.enable=false)")
        with self.metadata.lock:
            topic = self.topic(name)
            self.metadata.append([{"type": "remove_topic", "name": name, "topic_id": topic.topic_id}])
            for p in range(topic.num_partitions):
                partition = self.partitions.pop((name, p), None)
                if partition is not None:
                    with partition.lock:
                        partition.log.close_without_flush()
                self.logs.remove_dir(partition_dir_name(name, p), topic.topic_id)

    def alter_topic_config(self, name: str, overrides: dict[str, str], validate_only: bool) -> None:
        """Replace the topic's overrides with ``overrides`` (validated first)."""
        with self.metadata.lock:
            topic = self.topic(name)
            config = TOPIC_CONFIG.parse(overrides, defaults=self.topic_defaults)
            if validate_only:
                return
            records = [{"type": "config", "resource": "topic", "name": name, "key": k, "value": None}
                       for k in sorted(set(topic.configs) - set(overrides))]
            records += [{"type": "config", "resource": "topic", "name": name, "key": k, "value": str(v)}
                        for k, v in sorted(overrides.items()) if topic.configs.get(k) != str(v)]
            if records:
                self.metadata.append(records)
            for p in range(topic.num_partitions):
                self.partitions[(name, p)].set_config(config)

    # ------------------------------------------------------------------------------- lifecycle
    def flush_due(self) -> None:
        for partition in list(self.partitions.values()):
            partition.maybe_flush()

    def close(self) -> None:
        """Flush and close every log, then mark the shutdown clean."""
        for partition in self.partitions.values():
            partition.close()
        self.metadata.close()
        self.logs.mark_clean_shutdown()
