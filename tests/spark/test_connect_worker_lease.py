"""One Connect worker per ``group.id``: a second worker of a live group must not run the stored
connectors a second time (a source's records written twice). Kafka's workers of one group share
it through ``WorkerCoordinator`` and split the connectors; Riverlog's worker runs them all, so the
second one waits one session for the group and then refuses, naming the holder; a holder that
closes hands the group over at once, one killed with SIGKILL after its ``session.timeout.ms``."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from tests.conftest import wait_until
from tests.spark.connect_helpers import values

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.timeout(300)]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SESSION = {"session.timeout.ms": "1500", "heartbeat.interval.ms": "300"}


def _append(path, lines):
    with open(path, "a") as f:
        f.write("".join(line + "\n" for line in lines))


def test_second_worker_of_a_live_group_refuses_and_nothing_is_written_twice(spark, spark_broker, tmp_path):
    from connect import Worker
    from connect.errors import WorkerGroupInUseError
    bootstrap, source = spark_broker.bootstrap, tmp_path / "in.txt"
    _append(source, ["a", "b", "c"])

    def worker(port):
        return Worker(spark, {"bootstrap.servers": bootstrap, "group.id": "connect-lease", **SESSION,
                              "state.dir": str(tmp_path / "state"), "rest.advertised.host.name": "h",
                              "rest.port": str(port)})

    first = worker(18091).start()
    try:
        first.create_connector("lines", {"connector.class": "FileStreamSource", "file": str(source),
                                         "topic": "lease-lines", "value.converter": "StringConverter"})
        first.wait_for_state("lines", "RUNNING")
        wait_until(lambda: values(bootstrap, "lease-lines") == [b"a", b"b", b"c"], 60, 0.3, "the first lines")

        second = worker(18092)
        with pytest.raises(WorkerGroupInUseError) as refused:
            second.start()
        assert refused.value.code == 1305 and refused.value.retriable
        assert "h:18091" in str(refused.value) and "'connect-lease'" in str(refused.value)

        _append(source, ["d", "e"])
        wait_until(lambda: values(bootstrap, "lease-lines") == [b"a", b"b", b"c", b"d", b"e"], 60, 0.3, "d, e once")
        assert first.connector_status("lines")["connector"]["state"] == "RUNNING"
    finally:
        first.close()

    # the holder left the group on close: a successor gets it without waiting out a session
    t0 = time.monotonic()
    successor = worker(18093).start()
    try:
        assert time.monotonic() - t0 < 1.5 + 0.3 + 2.0
        assert successor.wait_for_state("lines", "RUNNING")["connector"]["worker_id"] == "h:18093"
        _append(source, ["f"])
        wait_until(lambda: values(bootstrap, "lease-lines") == [b"a", b"b", b"c", b"d", b"e", b"f"], 60, 0.3,
                   "f once")
    finally:
        successor.close()



def test_a_worker_that_lost_its_group_starts_and_writes_nothing(spark, spark_broker, tmp_path):
    """Once its membership is gone (another worker may run the connectors now) a worker refuses
    every request that would start a query or write a connector's config, target state or
    offsets, as a Kafka worker outside its group cannot; reading still answers."""
    from connect import Worker
    from connect.errors import ConflictError
    w = Worker(spark, {"bootstrap.servers": spark_broker.bootstrap, "group.id": "connect-lease-lost", **SESSION,
                       "config.storage.topic": "lease-lost-configs", "status.storage.topic": "lease-lost-status",
                       "offset.storage.topic": "lease-lost-offsets", "state.dir": str(tmp_path / "state"),
                       "rest.advertised.host.name": "h", "rest.port": "18094"})
    w.start()
    try:
        config = {"connector.class": "FileStreamSource", "file": str(tmp_path / "in.txt"), "topic": "lease-lost-lines"}
        w.create_connector("lost", config, "STOPPED")
        w._lease._lose()          # what the membership's revocation (or its session's expiry) runs
        for request in (lambda: w.resume("lost"), lambda: w.pause("lost"), lambda: w.restart("lost"),
                        lambda: w.restart("lost", include_tasks=True), lambda: w.put_connector_config("lost", config),
                        lambda: w.create_connector("other", config), lambda: w.delete_connector("lost"),
                        lambda: w.reset_offsets("lost")):
            with pytest.raises(ConflictError, match="lost its membership of group.id 'connect-lease-lost'"):
                request()
        assert w._connectors["lost"].query is None
        assert w.connector_status("lost")["connector"]["state"] == "UNASSIGNED"   # runs nowhere here
        w.storage.read_to_end()
        assert w.storage.configs.target_state("lost").value == "STOPPED"
        assert w.storage.configs.connectors() == ["lost"]
    finally:
        w.close()


_HOLDER = textwrap.dedent("""
    import sys, threading
    sys.path.insert(0, {root!r})
    from connect.config import WorkerConfig
    from connect.worker_lease import WorkerLease
    config = WorkerConfig.parse({{"bootstrap.servers": {bootstrap!r}, "group.id": {group!r},
                                 **{session!r}}})
    WorkerLease(config, "killed-host:8083", on_lost=lambda: print("LOST", flush=True)).acquire()
    print("HELD", flush=True)
    threading.Event().wait()
""")


def _holder(bootstrap, group):
    """A process holding ``group`` (no Spark): prints HELD once it holds it, LOST if it loses it."""
    from connect.config import WorkerConfig
    from connect.storage import TopicLog
    config = WorkerConfig.parse({"bootstrap.servers": bootstrap, "group.id": group, **SESSION})
    TopicLog({"bootstrap.servers": bootstrap}, config.config_storage_topic, 1, -1).ensure_topic()
    code = _HOLDER.format(root=ROOT, bootstrap=bootstrap, group=group, session=SESSION)
    return config, subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                                    start_new_session=True)


def test_a_killed_holder_blocks_its_successor_for_at_most_its_session(spark_broker):
    from connect.errors import WorkerGroupInUseError
    from connect.worker_lease import WorkerLease
    config, holder = _holder(spark_broker.bootstrap, "connect-lease-kill")
    try:
        assert holder.stdout.readline().strip() == "HELD"
        with pytest.raises(WorkerGroupInUseError, match="killed-host:8083"):
            WorkerLease(config, "waiting-host:8083").acquire()
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(10)
        t0 = time.monotonic()
        lease = WorkerLease(config, "successor-host:8083").acquire()
        try:
            assert lease.held and time.monotonic() - t0 <= (1500 + 300) / 1000 + 2.0
        finally:
            lease.close()
    finally:
        if holder.poll() is None:
            os.killpg(holder.pid, signal.SIGKILL)
            holder.wait(10)


def test_a_holder_whose_session_expired_is_told_it_lost_the_group(spark_broker):
    """A holder frozen past its session (SIGSTOP: a long GC pause, a suspended VM) is expired and
    the group moves on; once it runs again it must learn that, so its worker stops its queries."""
    from connect.worker_lease import WorkerLease
    config, holder = _holder(spark_broker.bootstrap, "connect-lease-stop")
    try:
        assert holder.stdout.readline().strip() == "HELD"
        os.killpg(holder.pid, signal.SIGSTOP)
        lease = WorkerLease(config, "successor-host:8083").acquire()
        try:
            os.killpg(holder.pid, signal.SIGCONT)
            assert holder.stdout.readline().strip() == "LOST"
            assert lease.held
        finally:
            lease.close()
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait(10)
