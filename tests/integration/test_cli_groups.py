"""``riverlog groups``: list, describe with lag, reset offsets (dry run, execute, refusal), delete."""
from __future__ import annotations

import datetime as dt
import time

import pytest

from broker.client import Consumer, Producer, TopicPartition
from tests.conftest import wait_until
from tests.integration.test_cli import create_topic, lines, run_cli

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def cli(shared_broker):
    def run(*args, check=True):
        return run_cli(shared_broker.bootstrap, *args, check=check)
    return run


def _produce(bootstrap, topic, n, timestamp=None):
    with Producer({"bootstrap.servers": bootstrap}) as p:
        for i in range(n):
            p.produce(topic, value=b"%d" % i, partition=i % 2, timestamp=timestamp or 0)
        assert p.flush(10) == 0


def _rows(text: str) -> list[list[str]]:
    out = [line.split() for line in lines(text)]
    header = next(i for i, r in enumerate(out) if r and r[0] == "GROUP")
    return [r for r in out[header + 1:] if r and not r[0].startswith("(")]


def _commit(bootstrap, group, topic, offsets):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    c.close()


def test_describe_shows_committed_offsets_and_lag(cli, shared_broker, topic_name):
    create_topic(shared_broker.bootstrap, topic_name, partitions=2)
    _produce(shared_broker.bootstrap, topic_name, 10)
    _commit(shared_broker.bootstrap, "lagging", topic_name, {0: 2, 1: 5})
    assert "lagging" in lines(cli("groups", "list").stdout)
    rows = _rows(cli("groups", "describe", "lagging").stdout)
    assert [r[:6] for r in rows] == [["lagging", topic_name, "0", "2", "5", "3"],
                                    ["lagging", topic_name, "1", "5", "5", "0"]]


def test_describe_members_of_a_running_group(cli, shared_broker, topic_name):
    create_topic(shared_broker.bootstrap, topic_name, partitions=2)
    c = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": "running", "group.instance.id": "pod-3"})
    c.subscribe([topic_name])
    try:
        wait_until(lambda: c.poll(0.05) is None and len(c.assignment()) == 2, 30, 0.01, "an assignment")
        out = cli("groups", "describe", "running", "--members").stdout
        assert "Stable" in out and "pod-3" in out and f"{topic_name}:0,{topic_name}:1" in out, out
        refused = cli("groups", "reset-offsets", "running", "--topic", topic_name, "--to-earliest", "--execute",
                      check=False)
        assert refused.returncode == 1 and "NON_EMPTY_GROUP" in refused.stderr, refused.stderr
        refused = cli("groups", "delete", "running", check=False)
        assert refused.returncode == 1 and "NON_EMPTY_GROUP" in refused.stderr, refused.stderr
    finally:
        c.close()


def test_reset_offsets_dry_run_then_execute(cli, shared_broker, topic_name):
    create_topic(shared_broker.bootstrap, topic_name, partitions=2)
    old = int((time.time() - 3600) * 1000)
    _produce(shared_broker.bootstrap, topic_name, 10, timestamp=old)   # 5 per partition, an hour ago
    _produce(shared_broker.bootstrap, topic_name, 4)                   # 2 per partition, now
    _commit(shared_broker.bootstrap, "resetting", topic_name, {0: 6, 1: 6})

    def plan(*how):
        return {int(r[2]): int(r[3]) for r in _rows(cli("groups", "reset-offsets", "resetting", "--topic", topic_name,
                                                        *how).stdout)}
    assert plan("--to-earliest") == {0: 0, 1: 0}
    assert plan("--to-latest") == {0: 7, 1: 7}
    assert plan("--shift-by", "-2") == {0: 4, 1: 4}
    assert plan("--to-offset", "100") == {0: 7, 1: 7}   # clamped to the log end
    half_hour_ago = dt.datetime.fromtimestamp(time.time() - 1800, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    assert plan("--to-datetime", half_hour_ago) == {0: 5, 1: 5}
    assert plan("--by-duration", "PT2H") == {0: 0, 1: 0}
    # As Kafka's tool: "t:" (an empty partition list) and a date-time without its 'T' are refused;
    # they reset every partition, or to the epoch ("2024" read as 2024 ms).
    for bad in (("--topic", f"{topic_name}:", "--to-earliest"), ("--topic", f"{topic_name}:x", "--to-earliest"),
                ("--topic", topic_name, "--to-datetime", "2024"), ("--topic", topic_name, "--to-datetime", "latest")):
        refused = cli("groups", "reset-offsets", "resetting", *bad, "--execute", check=False)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, (bad, refused.stderr)
    trailing = cli("groups", "reset-offsets", "resetting", "--topic", f"{topic_name}:0,", "--to-offset", "3").stdout
    assert {int(r[2]): int(r[3]) for r in _rows(trailing)} == {0: 3}            # a trailing comma is ignored
    # Nothing changed yet: those were dry runs.
    assert [r[3] for r in _rows(cli("groups", "describe", "resetting").stdout)] == ["6", "6"]
    cli("groups", "reset-offsets", "resetting", "--topic", f"{topic_name}:1", "--to-earliest", "--execute")
    assert [r[3] for r in _rows(cli("groups", "describe", "resetting").stdout)] == ["6", "0"]
    _commit(shared_broker.bootstrap, "resetting", topic_name, {0: 100, 1: 0})
    assert [r[5] for r in _rows(cli("groups", "describe", "resetting").stdout)] == ["-93", "7"]   # Kafka's lag


def test_delete_offsets_and_delete_group(cli, shared_broker, topic_name):
    create_topic(shared_broker.bootstrap, topic_name, partitions=2)
    _commit(shared_broker.bootstrap, "deleting", topic_name, {0: 0, 1: 0})
    cli("groups", "delete-offsets", "deleting", "--topic", f"{topic_name}:0")
    assert [r[2] for r in _rows(cli("groups", "describe", "deleting").stdout)] == ["1"]
    cli("groups", "delete", "deleting")
    assert "deleting" not in lines(cli("groups", "list").stdout)
    missing = cli("groups", "describe", "deleting", check=False)   # kafka-consumer-groups.sh exits 0 here too
    assert missing.returncode == 0 and "Consumer group 'deleting' does not exist." in missing.stderr, missing.stderr
    # several groups: each outcome is reported (the second was deleted unreported after the first failed)
    _commit(shared_broker.bootstrap, "deleting-2", topic_name, {0: 0})
    both = cli("groups", "delete", "deleting", "deleting-2", check=False)
    assert both.returncode == 1 and "Deleted group deleting-2." in both.stdout, (both.stdout, both.stderr)
    assert "group deleting was not deleted" in both.stderr
