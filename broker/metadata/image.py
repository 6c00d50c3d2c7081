"""Cluster metadata as records, and the image they build.

Metadata is a log of small records (as in KRaft): a topic is created, a config is set or removed,
a topic is removed. :class:`MetadataImage` is what replaying them yields; it is pure and
single-threaded, so the same replay serves start-up, tests and (later) a Raft-replicated log.

Record shapes (JSON objects):

    {"type": "topic", "name": str, "topic_id": str, "replicas": [[node, ...], ...]}
    {"type": "config", "resource": "topic" | "broker", "name": str, "key": str, "value": str | null}
    {"type": "remove_topic", "name": str, "topic_id": str}
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
class TopicImage:
    name: str
    topic_id: str
    replicas: list[list[int]]
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def num_partitions(self) -> int:
        return len(self.replicas)


@dataclass
class MetadataImage:
    topics: dict[str, TopicImage] = field(default_factory=dict)
    broker_configs: dict[str, str] = field(default_factory=dict)

    def apply(self, record: dict) -> None:
        kind = record["type"]
        if kind == "topic":
            self.topics[record["name"]] = TopicImage(record["name"], record["topic_id"],
                                                     [list(r) for r in record["replicas"]])
        elif kind == "remove_topic":
            topic = self.topics.get(record["name"])
            if topic is not None and topic.topic_id == record["topic_id"]:
                del self.topics[record["name"]]
        elif kind == "config":
            target = self._config_target(record)
            if target is None:
                return
            if record["value"] is None:
                target.pop(record["key"], None)
            else:
                target[record["key"]] = record["value"]
        else:
            raise ValueError(f"unknown metadata record type {kind!r}")

    def _config_target(self, record: dict) -> dict | None:
        if record["resource"] == "broker":
            return self.broker_configs
        topic = self.topics.get(record["name"])
        return None if topic is None else topic.configs
