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


def _node(data_dir: str, port: int, extra: list[str]) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "broker", "broker", "start", "--data-dir", data_dir, "--host", "127.0.0.1",
           "--port", str(port), "--log-level", "WARNING", *extra]
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT,
                            start_new_session=True)


def _create_at_once(bootstrap: str, factor: int) -> None:
    """Create a topic with no wait for any ready line: the client retries within its timeout."""
    with AdminClient({"bootstrap.servers": bootstrap, "request.timeout.ms": 30_000}) as admin:
        admin.create_topics([NewTopic("orders", 3, factor)])["orders"].result(40)
        # Every broker shows it within a moment (the answering one at once, others as they follow the log).
        wait_until(lambda: len(admin.list_topics("orders").topics["orders"].partitions) == 3, 10,
                   message="every broker to show the new topic")


def _stop(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
    for p in procs:
        p.wait(10)


@pytest.mark.parametrize("attempt", range(20))
def test_single_broker_create_topic_right_after_start(tmp_path, attempt):
    port, = free_ports(1)
    proc = _node(str(tmp_path / "node"), port, [])
    try:
        _create_at_once(f"127.0.0.1:{port}", 1)
    finally:
        _stop([proc])


@pytest.mark.parametrize("attempt", range(int(os.environ.get("RIVERLOG_READINESS_CLUSTER_RUNS", "20"))))
def test_three_node_cluster_create_topic_right_after_start(tmp_path, attempt):
    ports = free_ports(6)
    quorum = ",".join(f"{i + 1}@127.0.0.1:{ports[3 + i]}" for i in range(3))
    procs = [_node(str(tmp_path / f"node-{i + 1}"), ports[i], ["--node-id", str(i + 1), "--controller-quorum", quorum])
             for i in range(3)]
    try:
        _create_at_once(",".join(f"127.0.0.1:{p}" for p in ports[:3]), 3)
    finally:
        _stop(procs)
