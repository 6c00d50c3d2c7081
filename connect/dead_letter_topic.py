"""The dead-letter queue's topic, made before the first record needs it: Kafka's
``DeadLetterQueueReporter.createAndSetup`` creates ``errors.deadletterqueue.topic.name`` when a
sink task starts (one partition, ``errors.deadletterqueue.topic.replication.factor``) and fails the
task when it cannot, rather than leave the topic to auto-creation with the broker's defaults.

As for Riverlog's other internal topics, the replication factor is capped by the brokers the
cluster has registered (a down one counts: it gets its replicas, out of the ISR until it is back),
so the default of 3 works on a one-broker cluster; a topic already there is used as it is.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from broker.client import AdminClient, NewTopic
from broker.errors import TopicAlreadyExistsError

from connect.config import ConnectorConfig
from connect.errors import ConnectError

log = logging.getLogger("connect.errors")

PARTITIONS = 1
"""Kafka's ``DLQ_NUM_DESIRED_PARTITIONS``."""
REPLICATION_FACTOR = "errors.deadletterqueue.topic.replication.factor"


def capped(wanted: int, registered: int) -> int:
    """``wanted`` replicas, at most one per registered broker; -1 (the broker's default) as is."""
    return wanted if wanted == -1 else max(1, min(wanted, registered))


def ensure_dead_letter_topic(client_config: Mapping[str, Any], config: ConnectorConfig,
                             timeout: float = 30.0) -> None:
    """Create the connector's DLQ topic if it has one and the cluster does not; a
    :class:`~connect.errors.ConnectError` (Kafka's message) fails the connector's start otherwise."""
    topic = config.dlq_topic.strip()
    if not topic:
        return
    admin = AdminClient(dict(client_config))
    try:
        if topic in admin.list_topics(timeout=timeout).topics:   # Kafka's listTopics(): never auto-creates
            return
        wanted = config.dlq_topic_replication_factor
        registered = len(admin.describe_cluster(request_timeout=timeout, include_fenced_brokers=True)
                         .result(timeout).nodes)
        factor = capped(wanted, registered)
        if factor != wanted:
            log.warning("%s=%d for connector '%s' exceeds the %d broker(s) registered: creating dead letter "
                        "queue topic '%s' with replication factor %d", REPLICATION_FACTOR, wanted, config.name,
                        registered, topic, factor)
        try:
            admin.create_topics([NewTopic(topic, PARTITIONS, factor)])[topic].result(timeout)
        except TopicAlreadyExistsError:
            pass
    except Exception as e:  # noqa: BLE001 - any failure is the connector's, naming the topic
        raise ConnectError(f"Could not initialize dead letter queue with topic={topic}: {e}") from e
    finally:
        admin.close()


__all__ = ["PARTITIONS", "REPLICATION_FACTOR", "capped", "ensure_dead_letter_topic"]
