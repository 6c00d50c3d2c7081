"""``GET /health`` (Kafka's KIP-1017, ``RootResource.healthCheck``) says what the worker is: 503
``starting`` until its start returns (naming the stage it is in, e.g. waiting for its group), 200
``healthy`` then, and 500 ``unhealthy`` once it lost its ``group.id`` membership or its lock (its
main loop: every request and the supervisor's pass) stays taken past the health check's timeout,
naming what holds it. Real HTTP against a real worker's REST server and a real broker; no
connector runs a query, so the worker needs no Spark."""
from __future__ import annotations

import re
import threading
import time
from types import SimpleNamespace

import httpx
import pytest

import connect.plugins  # noqa: F401  (registers the built-in plugins)
from connect.rest import RestServer
from connect.worker import Worker

pytestmark = pytest.mark.integration

HEALTHY = {"status": "healthy", "message": "Worker has completed startup and is ready to handle requests."}
STARTING = "Worker is still starting up."
UNHEALTHY = "Worker was unable to handle this request and may be unable to handle other requests."


class _SessionWithoutQueries:
    """What a worker's start and close ask of its SparkSession when no connector runs a query."""

    def __init__(self):
        self.dataSource = SimpleNamespace(register=lambda source: None)
        self.streams = SimpleNamespace(addListener=lambda listener: None, removeListener=lambda listener: None)

    @property
    def sparkContext(self):
        raise RuntimeError("no SparkContext here")


def _worker(bootstrap: str, group: str, tmp_path) -> Worker:
    return Worker(_SessionWithoutQueries(), {"bootstrap.servers": bootstrap, "group.id": group,
                                             "state.dir": str(tmp_path / "state"), "session.timeout.ms": 6000,
                                             "heartbeat.interval.ms": 500})


def _wait_for(probe, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} within {timeout} s")
        time.sleep(0.05)


def _health(server: RestServer) -> tuple[int, dict]:
    r = httpx.get(server.url + "/health", timeout=30)
    return r.status_code, r.json()


def test_health_is_starting_until_the_worker_holds_its_group_then_healthy(shared_broker, topic_name, tmp_path):
    holder = _worker(shared_broker.bootstrap, topic_name, tmp_path).start()
    waiting = _worker(shared_broker.bootstrap, topic_name, tmp_path)
    started: list[BaseException | Worker] = []
    with RestServer(waiting, "127.0.0.1", 0) as server:
        try:
            code, body = _health(server)
            assert (code, body) == (503, {"status": "starting", "message": STARTING})    # start not called yet
            thread = threading.Thread(target=lambda: started.append(_start(waiting)), daemon=True)
            thread.start()
            code, body = _wait_for(lambda: (lambda h: h if "joining group.id" in h[1]["message"] else None)(
                _health(server)), "GET /health naming the group the start waits for")
            assert code == 503 and body["status"] == "starting"
            assert body["message"].startswith(STARTING + f" The worker is currently joining group.id '{topic_name}'")
        finally:
            holder.close()                     # the group is free: the waiting worker's start completes
        thread.join(30)
        assert started and started[0] is waiting, started
        try:
            assert _health(server) == (200, HEALTHY)
        finally:
            waiting.close()


def _start(worker: Worker):
    try:
        return worker.start()
    except BaseException as e:  # noqa: BLE001 - reported by the test
        return e


def test_health_is_unhealthy_once_the_worker_lost_its_group_or_closed(shared_broker, topic_name, tmp_path):
    from broker.client import TopicPartition
    worker = _worker(shared_broker.bootstrap, topic_name, tmp_path).start()
    with RestServer(worker, "127.0.0.1", 0) as server:
        try:
            assert _health(server) == (200, HEALTHY)
            # the consumer's on_lost: the coordinator expired the membership (heartbeats stopped)
            worker._lease._taken(None, [TopicPartition(worker.config.config_storage_topic, 0)])
            code, body = _health(server)
            assert code == 500 and body["status"] == "unhealthy"
            assert body["message"].startswith(UNHEALTHY + " The worker is currently out of its group: it lost its "
                                              f"membership of group.id '{topic_name}'")
        finally:
            worker.close()
        assert _health(server) == (500, {"status": "unhealthy", "message": UNHEALTHY + " The worker is shutting down."})


def test_health_is_unhealthy_while_a_request_hangs_holding_the_worker(broker_factory, topic_name, tmp_path):
    broker = broker_factory()
    worker = _worker(broker.bootstrap, topic_name, tmp_path).start()
    try:
        with RestServer(worker, "127.0.0.1", 0, health_check_timeout_ms=300) as server:
            assert _health(server) == (200, HEALTHY)
            broker.pause()                     # the config write below hangs, the worker's lock held
            create = threading.Thread(target=lambda: httpx.post(server.url + "/connectors", timeout=120, json={
                "name": "lines", "initial_state": "STOPPED",
                "config": {"connector.class": "FileStreamSource", "file": str(tmp_path / "in.txt"),
                           "topic": topic_name}}), daemon=True)
            create.start()
            try:
                code, body = _wait_for(lambda: (lambda h: h if h[0] != 200 else None)(_health(server)),
                                       "GET /health noticing the hung request")
            finally:
                broker.resume()
            assert code == 500 and body["status"] == "unhealthy"
            assert body["message"].startswith(UNHEALTHY + " The worker is currently handling the request "
                                              "POST /connectors, which began at ")
            create.join(120)
            _wait_for(lambda: _health(server) == (200, HEALTHY), "GET /health healthy again")
    finally:
        worker.close()


def test_health_is_unhealthy_when_the_group_membership_thread_stops_polling(shared_broker, topic_name, tmp_path):
    """A membership whose poll hangs past ``max.poll.interval.ms`` (``rebalance.timeout.ms``) may
    have been expired by the group without its revocation callback running (it runs in that poll),
    so the worker would still think it holds the group: GET /health says so instead of healthy."""
    worker = Worker(_SessionWithoutQueries(), {"bootstrap.servers": shared_broker.bootstrap, "group.id": topic_name,
                                               "state.dir": str(tmp_path / "state"), "session.timeout.ms": 6000,
                                               "heartbeat.interval.ms": 500, "rebalance.timeout.ms": 1500}).start()
    release = threading.Event()
    consumer = worker._lease._consumer
    poll = consumer.poll
    consumer.poll = lambda timeout=None: (release.wait(60), poll(timeout))[1]
    try:
        with RestServer(worker, "127.0.0.1", 0) as server:
            code, body = _wait_for(lambda: (lambda h: h if h[0] != 200 else None)(_health(server)),
                                   "GET /health noticing the hung membership thread")
            assert code == 500 and body["status"] == "unhealthy"
            assert re.fullmatch(re.escape(UNHEALTHY) + r" The worker may be out of its group: its group membership "
                                r"thread has not polled for \d+ s \(max\.poll\.interval\.ms=1500\): the group may "
                                r"have expired it\.", body["message"]), body
    finally:
        release.set()
        worker.close()
