"""A sink connector's offsets are its consumer group's (``connect-<name>``), as in Kafka: read,
altered and reset with the admin client in Kafka's REST shape
``{"partition": {"kafka_topic", "kafka_partition"}, "offset": {"kafka_offset"}}``, parsed and
answered with Kafka's messages (``SinkUtils.parseSinkConnectorOffsets``,
``Worker.completeModifyOffsetsCallback``)."""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from broker.client import AdminClient, ConsumerGroupTopicPartitions, TopicPartition
from broker.errors import RiverlogError

from connect.errors import BadRequestError
from connect.java_text import java_string

TIMEOUT = 30.0
KAFKA_TOPIC, KAFKA_PARTITION, KAFKA_OFFSET = "kafka_topic", "kafka_partition", "kafka_offset"
_INT, _LONG = 2 ** 31, 2 ** 63
_DIGITS = re.compile(r"[+-]?\d+")


def _parse_integer(value: Any, bound: int) -> int:
    """Java's ``parseInt``/``parseLong`` of ``String.valueOf(value)``: ValueError unless it is an
    optionally signed run of digits within (-bound, bound - 1)."""
    text = java_string(value)
    if not _DIGITS.fullmatch(text):
        raise ValueError(text)
    number = int(text)
    if not -bound <= number < bound:
        raise ValueError(text)
    return number


def modified_message(managed: bool, reset: bool) -> str:
    """Kafka's ``completeModifyOffsetsCallback`` answer: ``managed`` is the connector's
    ``alter_offsets`` result (False: it may keep offsets elsewhere that the user must change too)."""
    change = "reset" if reset else "altered"
    if managed:
        return f"The offsets for this connector have been {change} successfully"
    return (f"The Connect framework-managed offsets for this connector have been {change} successfully. However, "
            f"if this connector manages offsets externally, they will need to be manually {change} in the system "
            f"that the connector uses.")


def parse_sink_offsets(pairs: list[tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]]
                       ) -> dict[tuple[str, int], int | None]:
    """Kafka's ``SinkUtils.parseSinkConnectorOffsets``, with its messages (400): REST's
    ``{"kafka_topic", "kafka_partition"} -> {"kafka_offset"}`` pairs as ``{(topic, partition):
    offset}``, None removing the group's offset. Values are read as Kafka reads them, through
    their string form: ``3`` and ``"3"`` are both 3, while ``0.9``, ``2.0`` and ``true`` are refused."""
    parsed: dict[tuple[str, int], int | None] = {}
    for partition, offset in pairs:
        if partition is None:
            raise BadRequestError("The partition for a sink connector offset cannot be null or missing")
        if KAFKA_TOPIC not in partition or KAFKA_PARTITION not in partition:
            raise BadRequestError(f"The partition for a sink connector offset must contain the keys "
                                  f"'{KAFKA_TOPIC}' and '{KAFKA_PARTITION}'")
        if partition[KAFKA_TOPIC] is None:
            raise BadRequestError("Kafka topic names must be valid strings and may not be null")
        if partition[KAFKA_PARTITION] is None:
            raise BadRequestError("Kafka partitions must be valid numbers and may not be null")
        try:
            number = _parse_integer(partition[KAFKA_PARTITION], _INT)
        except ValueError:
            raise BadRequestError(f"Failed to parse the following Kafka partition value in the provided offsets: "
                                  f"'{java_string(partition[KAFKA_PARTITION])}'. Partition values for sink "
                                  f"connectors need to be integers.") from None
        tp = (java_string(partition[KAFKA_TOPIC]), number)
        if offset is None:
            parsed[tp] = None
            continue
        if KAFKA_OFFSET not in offset:
            raise BadRequestError(f"The offset for a sink connector should either be null or contain the key "
                                  f"'{KAFKA_OFFSET}'")
        try:
            parsed[tp] = _parse_integer(offset[KAFKA_OFFSET], _LONG)
        except ValueError:
            raise BadRequestError(f"Failed to parse the following Kafka offset value in the provided offsets: "
                                  f"'{java_string(offset[KAFKA_OFFSET])}'. Offset values for sink connectors "
                                  f"need to be integers.") from None
    return parsed


class OffsetsAdmin:
    """One admin client per cluster, opened on first use. Callers serialise (the worker's lock)."""

    def __init__(self, default_servers: str):
        self.default_servers = default_servers
        self._admins: dict[str, AdminClient] = {}

    def _admin(self, servers: str | None) -> AdminClient:
        servers = servers or self.default_servers
        if servers not in self._admins:
            self._admins[servers] = AdminClient({"bootstrap.servers": servers})
        return self._admins[servers]

    def cluster_id(self) -> str:
        """The worker's Kafka cluster's id (``GET /``'s ``kafka_cluster_id``)."""
        return self._admin(None).describe_cluster(request_timeout=30).result(30).cluster_id

    def sink_offsets(self, group: str, servers: str | None = None) -> list[tuple[dict, dict]]:
        found = self._admin(servers).list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)])[group].result(TIMEOUT)
        return [({"kafka_topic": tp.topic, "kafka_partition": tp.partition}, {"kafka_offset": tp.offset})
                for tp in found.topic_partitions or [] if tp.offset >= 0]

    def alter_sink_offsets(self, group: str, servers: str | None,
                           offsets: Mapping[tuple[str, int], int | None]) -> None:
        """Write :func:`parse_sink_offsets`' result: commit the offsets, delete those given None."""
        moved, removed = [], []
        for (topic, partition), offset in offsets.items():
            if offset is not None and offset < 0:
                raise BadRequestError(f"the offset for {topic}-{partition} is {offset}; a sink connector's "
                                      f"offset needs to be zero or more (or null to remove it)")
            tp = TopicPartition(topic, partition, -1001 if offset is None else offset)
            (moved if offset is not None else removed).append(tp)
        admin = self._admin(servers)
        if moved:
            altered = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, moved)])[group]
            # per partition, as librdkafka answers; Kafka's alterSinkConnectorOffsets fails on any (all())
            failed = next((tp for tp in altered.result(TIMEOUT).topic_partitions if tp.error is not None), None)
            if failed is not None:
                raise failed.error.exception()
        if removed:
            _check_deleted(group, admin.delete_consumer_group_offsets(group, removed).result(TIMEOUT))

    def reset_sink_offsets(self, group: str, servers: str | None = None) -> None:
        current = [TopicPartition(p["kafka_topic"], p["kafka_partition"]) for p, _ in self.sink_offsets(group, servers)]
        if not current:
            return
        try:
            _check_deleted(group, self._admin(servers).delete_consumer_group_offsets(group, current).result(TIMEOUT))
        except RiverlogError as e:
            raise BadRequestError(f"could not reset the offsets of group {group}: {e}") from e

    def close(self) -> None:
        for admin in self._admins.values():
            admin.close()
        self._admins = {}


__all__ = ["OffsetsAdmin", "java_string", "modified_message", "parse_sink_offsets"]


def _check_deleted(group: str, result) -> None:
    """OffsetDelete answers per partition (a topic a member still consumes keeps its offsets, as
    Kafka's ``OffsetMetadataManager.deleteOffsets``): a partition that failed fails the request,
    as Kafka's ``alterSinkConnectorOffsets`` does through ``DeleteConsumerGroupOffsetsResult.all()``."""
    failed = [tp for tp in result.topic_partitions if tp.error is not None]
    if failed:
        raise BadRequestError(f"could not remove the offsets of group {group} for "
                              + ", ".join(f"{tp.topic}-{tp.partition} ({tp.error.str()})" for tp in failed))
