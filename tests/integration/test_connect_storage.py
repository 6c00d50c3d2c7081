"""Connect's storage on a real broker: what one worker writes, a worker started later with the same
group.id and topics sees; source offsets count only when their transaction committed."""
from __future__ import annotations

import json

import pytest

from broker.client import Consumer, Producer, TopicPartition
from connect.config import WorkerConfig
from connect.states import ConnectorState, TargetState
from connect.storage import ConnectStorage
from connect.storage_format import Status

pytestmark = pytest.mark.integration


@pytest.fixture
def worker_config(shared_broker, request):
    suffix = request.node.name.replace("[", "-").replace("]", "")
    return WorkerConfig.parse({
        "bootstrap.servers": shared_broker.bootstrap, "group.id": f"connect-{suffix}",
        "config.storage.topic": f"configs-{suffix}", "status.storage.topic": f"status-{suffix}",
        "offset.storage.topic": f"offsets-{suffix}", "offset.storage.partitions": "3",
        "status.storage.partitions": "2"})


def test_a_new_worker_sees_configs_statuses_and_offsets_where_the_first_left_them(worker_config):
    with ConnectStorage(worker_config) as first:
        first.put_connector_config("orders", {"name": "orders", "connector.class": "Pg"})
        first.put_connector_config("gone", {"name": "gone", "connector.class": "Pg"})
        first.put_task_configs("orders", [{"task": "0"}, {"task": "1"}])
        first.put_target_state("orders", TargetState.PAUSED)
        first.remove_connector_config("gone")
        first.put_status(Status("orders", ConnectorState.FAILED, "w1:8083", 3, trace="boom"))
        first.put_status(Status("orders", ConnectorState.RUNNING, "w1:8083", 3, task=1))
        first.put_offsets("orders", [({"slot": "a"}, {"lsn": 10}), ({"slot": "b"}, {"lsn": 7})])
        first.put_offsets("orders", [({"slot": "a"}, {"lsn": 12})])

    with ConnectStorage(worker_config) as second:  # another machine: new clients, empty views
        assert second.configs.connectors() == ["orders"]
        assert second.configs.connector_configs["orders"]["connector.class"] == "Pg"
        assert second.configs.target_state("orders") == TargetState.PAUSED
        assert second.configs.tasks("orders") == [{"task": "0"}, {"task": "1"}]
        status = second.statuses.connector("orders")
        assert (status.state, status.trace, status.generation) == (ConnectorState.FAILED, "boom", 3)
        assert [t.state for t in second.statuses.task_statuses("orders")] == [ConnectorState.RUNNING]
        assert second.offsets.get("orders", {"slot": "a"}) == {"lsn": 12}
        assert second.offsets.get("orders", {"slot": "b"}) == {"lsn": 7}


def test_records_have_kafka_connects_keys_and_json(worker_config):
    with ConnectStorage(worker_config) as storage:
        storage.put_connector_config("c", {"name": "c"})
        storage.put_target_state("c", TargetState.STOPPED)
        storage.put_status(Status("c", ConnectorState.RUNNING, "w", 1))
        record = storage.offset_record("c", {"file": "x"}, {"pos": 5})
        storage.put_offsets("c", [({"file": "x"}, {"pos": 5})])

    raw = _read_all(worker_config, worker_config.config_storage_topic, 1)
    assert (b"connector-c", b'{"properties":{"name":"c"}}') in raw
    assert (b"target-state-c", b'{"state":"PAUSED","state.v2":"STOPPED"}') in raw
    raw = _read_all(worker_config, worker_config.status_storage_topic, worker_config.status_storage_partitions)
    assert raw == [(b"status-connector-c", b'{"state":"RUNNING","trace":null,"worker_id":"w","generation":1}')]
    raw = _read_all(worker_config, worker_config.offset_storage_topic, 3, partition=record.partition)
    assert raw == [(b'["c",{"file":"x"}]', b'{"pos":5}')]
    assert json.loads(record.key) == ["c", {"file": "x"}]


def test_offsets_of_an_aborted_transaction_are_not_seen_and_committed_ones_are(worker_config):
    with ConnectStorage(worker_config) as storage:
        for n, (lsn, commit) in enumerate([(100, False), (200, True), (300, False)]):
            producer = Producer({"bootstrap.servers": worker_config.bootstrap_servers,
                                 "transactional.id": f"pg-task-{worker_config.group_id}-{n}"})
            producer.init_transactions()
            producer.begin_transaction()
            producer.produce("pg-output-" + worker_config.group_id, value=b"row", key=b"k")
            topic, key, value, partition = storage.offset_record("pg", {"slot": "s"}, {"lsn": lsn})
            producer.produce(topic, value=value, key=key, partition=partition)
            producer.flush(30)
            (producer.commit_transaction if commit else producer.abort_transaction)()
            producer.close(1)
        storage.read_to_end()
        assert storage.offsets.get("pg", {"slot": "s"}) == {"lsn": 200}

    with ConnectStorage(worker_config) as restarted:
        assert restarted.offsets.get("pg", {"slot": "s"}) == {"lsn": 200}


def _read_all(worker_config, topic: str, partitions: int, partition: int | None = None) -> list[tuple]:
    consumer = Consumer({"bootstrap.servers": worker_config.bootstrap_servers, "group.id": "",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        wanted = range(partitions) if partition is None else [partition]
        out = []
        for p in wanted:
            tp = TopicPartition(topic, p)
            low, high = consumer.get_watermark_offsets(tp, 30)
            if high <= low:
                continue
            consumer.assign([TopicPartition(topic, p, low)])
            while consumer.position([tp])[0].offset < high:
                msg = consumer.poll(5)
                assert msg is not None, f"no record from {topic}[{p}] before offset {high}"
                out.append((msg.key(), msg.value()))
        return out
    finally:
        consumer.close()
