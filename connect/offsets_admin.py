"""A sink connector's offsets are its consumer group's (``connect-<name>``), as in Kafka: read,
altered and reset with the admin client in Kafka's REST shape
``{"partition": {"kafka_topic", "kafka_partition"}, "offset": {"kafka_offset"}}``."""
from __future__ import annotations

from broker.client import AdminClient, ConsumerGroupTopicPartitions, TopicPartition
from broker.errors import RiverlogError

from connect.errors import BadRequestError

TIMEOUT = 30.0


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

    def alter_sink_offsets(self, group: str, servers: str | None, pairs: list[tuple[dict, dict | None]]) -> None:
        moved, removed = [], []
        for partition, offset in pairs:
            try:
                number = -1001 if offset is None else int(offset["kafka_offset"])
                if offset is not None and number < 0:
                    raise ValueError("negative")
                tp = TopicPartition(str(partition["kafka_topic"]), int(partition["kafka_partition"]), number)
            except (KeyError, TypeError, ValueError) as e:
                raise BadRequestError(f"a sink connector's offset needs partition {{\"kafka_topic\": str, "
                                      f"\"kafka_partition\": int}} and offset {{\"kafka_offset\": int >= 0}} or "
                                      f"null; got {partition!r} -> {offset!r} ({e})") from None
            (moved if offset is not None else removed).append(tp)
        admin = self._admin(servers)
        if moved:
            admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, moved)])[group].result(TIMEOUT)
        if removed:
            admin.delete_consumer_group_offsets(group, removed).result(TIMEOUT)

    def reset_sink_offsets(self, group: str, servers: str | None = None) -> None:
        current = [TopicPartition(p["kafka_topic"], p["kafka_partition"]) for p, _ in self.sink_offsets(group, servers)]
        if not current:
            return
        try:
            self._admin(servers).delete_consumer_group_offsets(group, current).result(TIMEOUT)
        except RiverlogError as e:
            raise BadRequestError(f"could not reset the offsets of group {group}: {e}") from e

    def close(self) -> None:
        for admin in self._admins.values():
            admin.close()
        self._admins = {}


__all__ = ["OffsetsAdmin"]
