"""Cluster metadata as records, and the image they build.

Metadata is a log of small records (as in KRaft), replicated by the controller quorum's Raft log.
:class:`MetadataImage` is what replaying them yields; it is pure and single-threaded, so the same
replay serves start-up, brokers following the quorum, tests and the simulation. Replay must be
deterministic: every derived value (leader epochs, partition epochs) is computed the same way on
every node.

Record shapes (JSON objects):

    {"type": "topic", "name": str, "topic_id": str, "replicas": [[node, ...], ...], "isrs": [[node, ...], ...]?}
        a topic; each partition starts with its isr (without "isrs": its replicas), leader = isr[0],
        leader epoch 0 (Kafka's ``buildPartitionRegistration``: a fenced replica starts out of the ISR)
    {"type": "add_partitions", "name": str, "topic_id": str, "replicas": [[node, ...], ...], "isrs": [...]?}
    {"type": "partition_change", "topic_id": str, "partition": int, "leader": int?, "isr": [int]?}
        a new leader (-1: none) bumps the leader epoch; any change bumps the partition epoch
    {"type": "config", "resource": "topic" | "broker", "name": str, "key": str, "value": str | null}
    {"type": "remove_topic", "name": str, "topic_id": str}
    {"type": "register_broker", "node_id": int, "host": str, "port": int, "incarnation": str,
     "inter_broker": [host, port]?}
        the broker epoch is the metadata offset of this record (as KRaft); a broker starts fenced;
        host/port is the client listener, inter_broker the listener other brokers use (KRaft's endpoints)
    {"type": "broker_state", "node_id": int, "fenced": bool?, "shutting_down": bool?}
    {"type": "partition_state", ...}  full partition state, only in snapshots (``to_records``)
    {"type": "producer_ids", "next": int}
        a block of producer ids below ``next`` was handed to a broker (KIP-730)
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from broker.errors import InvalidTopicError

MAX_TOPIC_NAME = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


def validate_topic_name(name: str) -> None:
    """Kafka's rules: 1-249 characters of [a-zA-Z0-9._-], and not '.' or '..'."""
    if not name:
        raise InvalidTopicError("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicError(f"topic name cannot be '{name}'")
    if len(name) > MAX_TOPIC_NAME:
        raise InvalidTopicError(f"topic name is {len(name)} characters; the limit is {MAX_TOPIC_NAME}")
    if not _LEGAL.fullmatch(name):
        bad = sorted({c for c in name if not re.match(r"[a-zA-Z0-9._-]", c)})
        raise InvalidTopicError(
            f"topic name '{name}' contains {''.join(bad)!r}; only ASCII letters, digits, '.', '_' and '-' are allowed")


@dataclass
class PartitionState:
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0

    def copy(self) -> "PartitionState":
        return PartitionState(list(self.replicas), list(self.isr), self.leader, self.leader_epoch,
                              self.partition_epoch)


@dataclass
class TopicImage:
    name: str
    topic_id: str
    partitions: list[PartitionState]
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def replicas(self) -> list[list[int]]:
        return [p.replicas for p in self.partitions]

    @property
    def num_partitions(self) -> int:
        return len(self.partitions)


@dataclass
class BrokerRegistration:
    node_id: int
    host: str
    port: int
    incarnation: str
    broker_epoch: int
    fenced: bool = True
    shutting_down: bool = False
    inter_broker: tuple[str, int] | None = None  # None: registered before listeners were split

    @property
    def inter_broker_address(self) -> str:
        host, port = self.inter_broker or (self.host, self.port)
        return f"{host}:{port}"


@dataclass
class MetadataImage:
    topics: dict[str, TopicImage] = field(default_factory=dict)
    broker_configs: dict[str, str] = field(default_factory=dict)
    brokers: dict[int, BrokerRegistration] = field(default_factory=dict)
    next_producer_id: int = 0  # the first producer id not yet handed to a broker
    offset: int = -1  # metadata log offset of the last record applied

    def apply(self, record: dict, offset: int | None = None) -> None:
        """Apply one record; ``offset`` is its place in the metadata log (broker epochs come from it)."""
        if offset is not None:
            self.offset = offset
        kind = record["type"]
        handler = _HANDLERS.get(kind)
        if handler is None:
            raise ValueError(f"unknown metadata record type {kind!r}")
        handler(self, record)

    # ----------------------------------------------------------------------------- lookups
    def topic_by_id(self, topic_id: str) -> TopicImage | None:
        for topic in self.topics.values():
            if topic.topic_id == topic_id:
                return topic
        return None

    def live_brokers(self) -> list[int]:
        """Registered, unfenced brokers that are not shutting down: where leaders may go."""
        return sorted(b.node_id for b in self.brokers.values() if not b.fenced and not b.shutting_down)

    def to_records(self) -> list[dict]:
        """Records that rebuild this image from nothing (the content of a metadata snapshot)."""
        out: list[dict] = []
        for b in sorted(self.brokers.values(), key=lambda b: b.node_id):
            out.append({"type": "register_broker", "node_id": b.node_id, "host": b.host, "port": b.port,
                        "incarnation": b.incarnation, "broker_epoch": b.broker_epoch,
                        **({"inter_broker": list(b.inter_broker)} if b.inter_broker else {})})
            out.append({"type": "broker_state", "node_id": b.node_id, "fenced": b.fenced,
                        "shutting_down": b.shutting_down})
        out += [{"type": "config", "resource": "broker", "name": "", "key": k, "value": v}
                for k, v in sorted(self.broker_configs.items())]
        if self.next_producer_id:
            out.append({"type": "producer_ids", "next": self.next_producer_id})
        for t in sorted(self.topics.values(), key=lambda t: t.name):
            out.append({"type": "topic", "name": t.name, "topic_id": t.topic_id, "replicas": t.replicas})
            for i, p in enumerate(t.partitions):
                out.append({"type": "partition_state", "topic_id": t.topic_id, "partition": i,
                            "isr": p.isr, "leader": p.leader, "leader_epoch": p.leader_epoch,
                            "partition_epoch": p.partition_epoch})
            out += [{"type": "config", "resource": "topic", "name": t.name, "key": k, "value": v}
                    for k, v in sorted(t.configs.items())]
        return out


def _new_partitions(record: dict) -> list[PartitionState]:
    replicas = [list(r) for r in record["replicas"]]
    isrs = [list(i) for i in record.get("isrs") or replicas]
    return [PartitionState(r, i, i[0] if i else -1) for r, i in zip(replicas, isrs)]


def _apply_topic(image: MetadataImage, record: dict) -> None:
    image.topics[record["name"]] = TopicImage(record["name"], record["topic_id"], _new_partitions(record))


def _apply_add_partitions(image: MetadataImage, record: dict) -> None:
    topic = image.topics.get(record["name"])
    if topic is not None and topic.topic_id == record["topic_id"]:
        topic.partitions += _new_partitions(record)


def _partition(image: MetadataImage, record: dict) -> PartitionState | None:
    topic = image.topic_by_id(record["topic_id"])
    if topic is None or not 0 <= record["partition"] < topic.num_partitions:
        return None
    return topic.partitions[record["partition"]]


def _apply_partition_change(image: MetadataImage, record: dict) -> None:
    p = _partition(image, record)
    if p is None:
        return
    if "leader" in record and record["leader"] != p.leader:
        p.leader = record["leader"]
        p.leader_epoch += 1
    if "isr" in record:
        p.isr = list(record["isr"])
    p.partition_epoch += 1


def _apply_partition_state(image: MetadataImage, record: dict) -> None:
    p = _partition(image, record)
    if p is not None:
        p.isr, p.leader = list(record["isr"]), record["leader"]
        p.leader_epoch, p.partition_epoch = record["leader_epoch"], record["partition_epoch"]


def _apply_remove_topic(image: MetadataImage, record: dict) -> None:
    topic = image.topics.get(record["name"])
    if topic is not None and topic.topic_id == record["topic_id"]:
        del image.topics[record["name"]]


def _apply_config(image: MetadataImage, record: dict) -> None:
    if record["resource"] == "broker":
        target = image.broker_configs
    else:
        topic = image.topics.get(record["name"])
        if topic is None:
            return
        target = topic.configs
    if record["value"] is None:
        target.pop(record["key"], None)
    else:
        target[record["key"]] = record["value"]


def _apply_register_broker(image: MetadataImage, record: dict) -> None:
    epoch = record.get("broker_epoch", image.offset)
    inter = record.get("inter_broker")
    image.brokers[record["node_id"]] = BrokerRegistration(
        record["node_id"], record["host"], record["port"], record["incarnation"], epoch,
        inter_broker=(inter[0], inter[1]) if inter else None)


def _apply_broker_state(image: MetadataImage, record: dict) -> None:
    broker = image.brokers.get(record["node_id"])
    if broker is None:
        return
    if "fenced" in record:
        broker.fenced = record["fenced"]
    if "shutting_down" in record:
        broker.shutting_down = record["shutting_down"]


def _apply_producer_ids(image: MetadataImage, record: dict) -> None:
    image.next_producer_id = max(image.next_producer_id, record["next"])


_HANDLERS = {
    "producer_ids": _apply_producer_ids,
    "topic": _apply_topic,
    "add_partitions": _apply_add_partitions,
    "partition_change": _apply_partition_change,
    "partition_state": _apply_partition_state,
    "remove_topic": _apply_remove_topic,
    "config": _apply_config,
    "register_broker": _apply_register_broker,
    "broker_state": _apply_broker_state,
}
