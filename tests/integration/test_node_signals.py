"""A node's signals: SIGUSR1 prints every thread's stack and the node goes on serving (what jstack
is to a Kafka broker, for a node that does not stop); SIGTERM then stops it cleanly."""
from __future__ import annotations

import signal
import time

from broker.client import AdminClient
from tests.conftest import BrokerProcess


def test_sigusr1_prints_every_threads_stack_and_the_node_still_serves_then_sigterm_stops_it(tmp_path):
    node = BrokerProcess(str(tmp_path / "node")).start()
    try:
        # the node's main thread reaches its serving loop (broker_cmd.py) after the port opens
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any("ready: serving clients" in line for line in node.output):
            time.sleep(0.05)
        seen = len(node.output)
        node.proc.send_signal(signal.SIGUSR1)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any("broker_cmd.py" in line for line in node.output[seen:]):
            time.sleep(0.05)
        dump = "".join(node.output[seen:])
        assert "most recent call first" in dump and "broker_cmd.py" in dump, dump
        assert dump.count("Thread 0x") > 3, dump          # every thread, not the main one only
        assert node.alive
        with AdminClient({"bootstrap.servers": node.bootstrap}) as admin:
            assert admin.list_topics(timeout=20).brokers
        assert node.stop() == 0
    finally:
        node.kill9()
