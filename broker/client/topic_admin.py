"""``AdminClient.describe_topics``, mixed into :class:`~broker.client.admin.AdminClient`.

    fs = admin.describe_topics(TopicCollection(["orders"]))
    d = fs["orders"].result()     # TopicDescription(name, topic_id: Uuid, is_internal, partitions)
    [p.leader.id for p in d.partitions]

One Metadata request for all the topics (never creating them); a topic the broker does not know
fails its own future with UnknownTopicOrPartitionError.
"""
from __future__ import annotations

from concurrent.futures import Future

from broker.client.admin_fan_out import _refused
from broker.client.model import (TOPIC_OPERATIONS, Node, TopicCollection, TopicDescription, TopicPartitionInfo, Uuid,
                                 authorized)
from broker.errors import error_for_code
from broker.proto import riverlog_pb2 as pb


def topic_uuid(topic_id: str) -> Uuid | str:
    """The broker's topic id (32 hex digits) as confluent-kafka's ``Uuid``: its two signed 64-bit
    halves, printed in base64 as librdkafka prints a topic id. An id in another form is kept as is."""
    try:
        bits = int(topic_id, 16) if len(topic_id) == 32 else None
    except ValueError:
        bits = None
    if bits is None:
        return topic_id
    signed = [half - (1 << 64) if half >= 1 << 63 else half for half in (bits >> 64, bits & ((1 << 64) - 1))]
    return Uuid(*signed)


def topic_descriptions(response: pb.MetadataResponse):
    """(name, TopicDescription or error) for every topic of a Metadata response."""
    nodes = {b.node_id: Node(b.node_id, b.host, b.port) for b in response.brokers}

    def node(node_id: int) -> Node:
        return nodes.get(node_id) or Node(node_id, "", -1)

    for t in response.topics:
        if t.error_code:
            yield t.name, error_for_code(t.error_code)(t.error_message)
            continue
        partitions = [TopicPartitionInfo(p.partition, node(p.leader) if p.leader >= 0 else None,
                                         [node(r) for r in p.replicas], [node(r) for r in p.isr])
                      for p in sorted(t.partitions, key=lambda p: p.partition)]
        yield t.name, TopicDescription(t.name, topic_uuid(t.topic_id), t.internal, partitions)


class TopicAdmin:
    """Needs ``self.cluster`` and ``self._fan_out`` (from AdminClient)."""

    def describe_topics(self, topics: TopicCollection, request_timeout: float | None = None,
                        include_authorized_operations: bool = False) -> dict[str, Future]:
        """A future per topic name resolving to :class:`TopicDescription`. With
        ``include_authorized_operations`` each lists every topic operation: Riverlog has no
        authorizer, and Kafka's brokers without one grant them all."""
        if not isinstance(topics, TopicCollection):
            raise TypeError("describe_topics takes a TopicCollection, e.g. TopicCollection(['orders'])")
        names = list(topics.topic_names)
        if len(set(names)) != len(names):   # librdkafka's rd_kafka_DescribeTopics, before sending
            return _refused(dict.fromkeys(names), "Duplicate topics not allowed")
        request = pb.MetadataRequest(topics=names, all_topics=False)
        def described(response):
            for name, d in topic_descriptions(response):
                if isinstance(d, TopicDescription):
                    d.authorized_operations = authorized(TOPIC_OPERATIONS, include_authorized_operations)
                yield name, d
        return self._fan_out(names, lambda: self.cluster.call_any("Metadata", request, request_timeout), described)
