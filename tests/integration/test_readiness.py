"""A broker is ready when it answers: start-then-use scripts work at once.

A node answers clients ``BrokerNotAvailable`` (retriable) until it has caught up, registered and
been unfenced, and a controller that just became active answers "not yet" to a replication factor
only brokers still starting could hold; so a topic created the moment the ports open is created.
"""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from broker.client import AdminClient, NewTopic
from tests.conftest import ROOT, free_ports, wait_until

pytestmark = pytest.mark.slow
# Each start is a race between the client and the node's start-up; the suite runs a few of each and
# ``make soak`` many (RIVERLOG_READINESS_RUNS).
RUNS = int(os.environ.get("RIVERLOG_READINESS_RUNS", "4"))


def _node(data_dir: str, port: int, extra: list[str]) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "broker", "broker", "start", "--data-dir", data_dir, "--host", "127.0.0.1",
           "--port", str(port), "--log-level", "WARNING", *extra]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT,
                            start_new_session=True)


def _create_at_once(bootstrap: str, factor: int) -> None:
    """Create a topic with no wait for any ready line: the client retries within its timeout; the
    topic then has its 3 partitions, each with ``factor`` replicas, all in sync, and a leader."""
    with AdminClient({"bootstrap.servers": bootstrap, "request.timeout.ms": 30_000}) as admin:
        assert admin.create_topics([NewTopic("orders", 3, factor)])["orders"].result(40) is None
        # Every broker shows it within a moment (the answering one at once, others as they follow the log).
        wait_until(lambda: len(admin.list_topics("orders").topics["orders"].partitions) == 3, 10,
                   message="every broker to show the new topic")
        partitions = wait_until(lambda: _placed(admin.list_topics("orders").topics["orders"], factor), 20,
                                message="a leader and an in-sync replica set for every partition")
        assert sorted(partitions) == [0, 1, 2]


def _placed(topic, factor: int) -> dict | None:
    """The topic's partitions once each has ``factor`` distinct replicas, all in sync, one leading."""
    parts = topic.partitions
    placed = topic.error is None and len(parts) == 3 and all(
        len(set(p.replicas)) == factor and sorted(p.isr) == sorted(p.replicas) and p.leader in p.replicas
        for p in parts.values())
    return parts if placed else None


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
    for p in procs:
        p.wait(10)


@pytest.mark.parametrize("attempt", range(RUNS))
def test_single_broker_create_topic_right_after_start(tmp_path, attempt):
    port, = free_ports(1)
    proc = _node(str(tmp_path / "node"), port, [])
    try:
        _create_at_once(f"127.0.0.1:{port}", 1)
    finally:
        _stop([proc])


@pytest.mark.parametrize("attempt", range(RUNS))
def test_three_node_cluster_create_topic_right_after_start(tmp_path, attempt):
    ports = free_ports(6)
    quorum = ",".join(f"{i + 1}@127.0.0.1:{ports[3 + i]}" for i in range(3))
    procs = [_node(str(tmp_path / f"node-{i + 1}"), ports[i], ["--node-id", str(i + 1), "--controller-quorum", quorum])
             for i in range(3)]
    try:
        _create_at_once(",".join(f"127.0.0.1:{p}" for p in ports[:3]), 3)
    finally:
        _stop(procs)
