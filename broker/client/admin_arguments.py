"""What ``AdminClient``'s topic and config calls accept, checked before anything is sent, as
confluent-kafka's argument parsing checks it (same exception types, librdkafka's messages).

A wrong argument is refused at the call, never turned into a request: ``delete_topics("orders")``
must not be read as the topics ``o``, ``r``, ``d``..., and a negative timeout is an error, not
"no timeout". One leniency: an empty list is an empty dict of futures (confluent-kafka raises
ValueError), so "create whatever is missing" code needs no guard.
"""
from __future__ import annotations

import math

ADMIN_CLOSED = "AdminClient has been closed"  # confluent-kafka's ERR_MSG_ADMIN_CLIENT_CLOSED


def check_items(items, kind: type, what: str, wrong_item: type[Exception] = ValueError) -> list:
    """A list (or tuple) of ``kind``: anything else is a TypeError, a list holding anything else a
    ValueError (confluent's "Expected list of NewTopic objects"; its newer calls, such as
    ``incremental_alter_configs``, raise TypeError there: ``wrong_item``)."""
    if not isinstance(items, (list, tuple)):
        raise TypeError(f"Expected list of {what}, not {type(items).__name__}")
    for item in items:
        if not isinstance(item, kind):
            raise wrong_item(f"Expected list of {what}, not {type(item).__name__}")
    return list(items)


def check_topic_names(topics) -> list[str]:
    """``delete_topics``' list (or tuple) of topic names."""
    return check_items(topics, str, "topic strings")


def check_options(validate_only=False, request_timeout=None, operation_timeout=None) -> None:
    """The common admin options: ``validate_only`` a bool (TypeError otherwise), timeouts in seconds
    within librdkafka's 0..3600 (ValueError otherwise)."""
    if not isinstance(validate_only, bool):
        raise TypeError(f"The \"validate_only\" property must be a bool, not {type(validate_only).__name__}")
    for name, value in (("request_timeout", request_timeout), ("operation_timeout", operation_timeout)):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
        if not math.isfinite(value) or not 0 <= value <= 3600:
            raise ValueError(f"{name}: expected 0..3600 seconds, got {value}")


def check_partitions(partitions, what: str = "request") -> None:
    """Partitions named to ``list_offsets``/``delete_records``: TopicPartitions (TypeError
    otherwise) with a topic and a partition number (ValueError for "" or a negative partition)."""
    for tp in partitions:
        if tp is None or not hasattr(tp, "topic") or not hasattr(tp, "partition"):
            raise TypeError(f"Element of the {what} list must be of type 'TopicPartition' got '{type(tp).__name__}'")
        if not tp.topic:
            raise ValueError("partition topic name cannot be empty")
        if tp.partition < 0:
            raise ValueError("'partition' cannot be negative")


PARTITIONS_MAX = 100_000   # librdkafka's RD_KAFKAP_PARTITIONS_MAX
BROKERS_MAX = 10_000  # librdkafka's RD_KAFKAP_BROKERS_MAX: the largest replication factor it sends


def check_new_partitions(partitions) -> None:
    """librdkafka's ``rd_kafka_NewPartitions_new``: a total of 1..100000 partitions."""
    if not 1 <= partitions.new_total_count <= PARTITIONS_MAX:
        raise ValueError(f"Invalid NewPartitions({partitions.topic}): new_total_cnt out of expected range "
                         f"1..{PARTITIONS_MAX}")


def check_new_topic(topic) -> None:
    """librdkafka's ``rd_kafka_NewTopic_new``: a partition count of -1 (the broker's default) up to
    100000 and a replication factor of -1 up to 10000, or confluent-kafka's ``create_topics``
    raises ValueError with librdkafka's message before anything is sent."""
    if not -1 <= topic.num_partitions <= PARTITIONS_MAX:
        raise ValueError(f"num_partitions out of expected range 1..{PARTITIONS_MAX} or -1 for broker default")
    if not -1 <= topic.replication_factor <= BROKERS_MAX:
        raise ValueError(f"replication_factor out of expected range -1..{BROKERS_MAX}")
