"""connect-configs must have one partition: its records are a write-ahead log whose order matters
(a task config before its commit, a connector's tombstone before its re-creation), and a topic of
several partitions is read back in another order. Kafka's ``KafkaConfigBackingStore.start`` refuses
one; so does the worker, before it joins its group or reads anything."""
from __future__ import annotations

import pytest

from broker.client import AdminClient, NewTopic
from connect.config import WorkerConfig
from connect.errors import ConfigError
from connect.storage import ConnectStorage

pytestmark = pytest.mark.integration


def test_a_config_topic_of_several_partitions_is_refused_with_kafkas_message(shared_broker, topic_name):
    with AdminClient({"bootstrap.servers": shared_broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic_name, 3, 1, config={"cleanup.policy": "compact"})])[topic_name].result(30)
    config = WorkerConfig.parse({"bootstrap.servers": shared_broker.bootstrap, "group.id": "g",
                                 "config.storage.topic": topic_name})
    storage = ConnectStorage(config)
    try:
        with pytest.raises(ConfigError) as refused:
            storage.start()
        assert str(refused.value) == (f"Topic '{topic_name}' supplied via the 'config.storage.topic' property is "
                                      "required to have a single partition in order to guarantee consistency of "
                                      "connector configurations, but found 3 partitions.")
        with pytest.raises(ConfigError, match="required to have a single partition"):
            storage.ensure_config_topic()      # what the worker calls before joining its group
    finally:
        storage.close()


def test_a_config_topic_of_one_partition_is_created_and_kept(shared_broker, topic_name):
    config = WorkerConfig.parse({"bootstrap.servers": shared_broker.bootstrap, "group.id": "g",
                                 "config.storage.topic": topic_name})
    storage = ConnectStorage(config)
    try:
        storage.ensure_config_topic()
        assert storage.config_log.partitions == 1
    finally:
        storage.close()
