"""Shared fixtures: real broker processes on 127.0.0.1 with temporary data directories."""
from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A Python process Spark starts (a worker, a streaming source's runner) gives its JVM 15 s to
# answer the handshake (SPARK_AUTH_SOCKET_TIMEOUT); on a loaded 2-core CI machine a JVM missed
# that and a connector failed with CANNOT_OPEN_SOCKET. The suite's JVMs, and those of the
# children and notebook kernels it starts (they inherit this environment), get 120 s.
os.environ.setdefault("SPARK_AUTH_SOCKET_TIMEOUT", "120")

# Property tests draw the same examples on every run (a failure is a change, never a draw's luck);
# HYPOTHESIS_PROFILE=explore draws new ones, as `make soak` does with more seeds.
from hypothesis import settings as _hypothesis_settings  # noqa: E402

_hypothesis_settings.register_profile("riverlog", derandomize=True)
_hypothesis_settings.register_profile("explore", derandomize=False)
_hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "riverlog"))


def wait_until(condition, timeout: float = 20.0, interval: float = 0.02, message: str = "condition"):
    """Poll ``condition`` until it returns something truthy; fail the test at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


# ------------------------------------------------------------------------------ pytest-xdist's schedule
# ``make test`` runs the suite on two pytest-xdist workers (``-n 2 --dist loadfile``): most tests
# outside Spark's wait on processes and sockets, not on the two cores. Each test module is one unit,
# so its module fixtures (a broker, a cluster) start once. Spark's modules come first, the longest
# first (a fault scenario or a notebook takes minutes), and no more than SPARK_LANES workers run them
# at a time: each is a SparkSession, a JVM running local[2] that keeps both cores busy, and a second
# one only takes turns with it (measured with two Spark workers beside a third: a fault scenario
# 2.6 times as long, and Python workers timing out connecting back to their JVM).
SPARK_LANES = 1
# Once only Spark's modules are left (the shorter ones: the longest went first) a worker would
# otherwise sit idle for the rest of the run (17 of 34 minutes, measured); then this many may run
# them. Measured on 2 cores: 34 min 24 s with one lane throughout, 29 min 55 s and 34 min 9 s with this
# (the machine varies by ~15% between runs).
SPARK_LANES_AT_THE_END = 2


def _spark_module(path: str) -> bool:
    """Decided from the path alone: the scheduler sees node ids, not markers."""
    path = path.replace(os.sep, "/")
    return path.startswith("tests/spark/") or os.path.basename(path).startswith("test_spark")


def pytest_collection_modifyitems(config, items):
    """On pytest-xdist's workers: Spark's modules first, the longest first, the rest in place."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return
    weight: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        if _spark_module(module):
            long = item.get_closest_marker("slow") is not None or "notebook" in module
            weight[module] = weight.get(module, 0) + (20 if long else 1)
    order = {m: i for i, m in enumerate(sorted(weight, key=lambda m: (-weight[m], m)))}
    items.sort(key=lambda item: order.get(item.nodeid.split("::", 1)[0], len(order)))


def pytest_collection_finish(session):
    """A process that will run Spark's modules starts its SparkSession now, before a test starts
    gRPC's threads in it: PySpark launches its JVM with fork and exec, and a fork beside gRPC's
    threads can lose the launcher (JAVA_GATEWAY_EXITED), failing every Spark test after it. The
    spark fixture then gets this session."""
    config = session.config
    if config.option.collectonly or (config.pluginmanager.hasplugin("dsession")
                                     and "PYTEST_XDIST_WORKER" not in os.environ):
        return   # listing tests, or pytest-xdist's controller (its workers run the tests)
    if any(_spark_module(item.nodeid.split("::", 1)[0]) for item in session.items):
        import tempfile

        from tests.spark.conftest import start_spark
        # The JVM (and the Python workers it starts) write their logs to a file, not to the run's
        # output: started outside a test, no capture would take them.
        log = os.path.join(tempfile.gettempdir(), f"riverlog-tests-spark-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.log")
        saved = os.dup(1), os.dup(2)
        with open(log, "ab") as f:
            os.dup2(f.fileno(), 1)
            os.dup2(f.fileno(), 2)
            try:
                start_spark(tempfile.mkdtemp(prefix="riverlog-warehouse-"))
            finally:
                os.dup2(saved[0], 1)
                os.dup2(saved[1], 2)
                os.close(saved[0])
                os.close(saved[1])


def pytest_xdist_make_scheduler(config, log):
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class SparkLanes(LoadFileScheduling):
        """Modules in collection order; a Spark module only to a worker already running one or
        while fewer than SPARK_LANES workers are."""

        def _spark_pending(self, node) -> bool:
            return any(_spark_module(scope) and not all(done.values())
                       for scope, done in self.assigned_work.get(node, {}).items())

        def _others_pending(self, node) -> bool:
            """A module outside Spark's is queued, or unfinished on another worker. The asking
            worker's own is not counted: a worker holds its last test back (it runs a test once it
            knows the next one, for teardown) until it gets more work."""
            return (any(not _spark_module(scope) for scope in self.workqueue)
                    or any(not _spark_module(scope) and not all(done.values())
                           for other, work in self.assigned_work.items() if other is not node
                           for scope, done in work.items()))

        def _assign_work_unit(self, node) -> None:
            lanes = sum(self._spark_pending(n) for n in self.nodes if n is not node)
            limit = SPARK_LANES if self._others_pending(node) else max(SPARK_LANES, SPARK_LANES_AT_THE_END)
            for scope in self.workqueue:
                if not _spark_module(scope) or lanes < limit or self._spark_pending(node):
                    self.workqueue.move_to_end(scope, last=False)
                    super()._assign_work_unit(node)
                    return
            # only Spark modules are left and the lanes are busy: this worker waits for one

        def mark_test_complete(self, node, item_index, duration=0) -> None:
            super().mark_test_complete(node, item_index, duration)
            for other in self.nodes:   # a worker left waiting gets work when a lane frees
                if other is not node and not self._pending_of(self.assigned_work.get(other, {})):
                    self._reschedule(other)

    config.option.loadscopereorder = False   # keep the collection's order: Spark's longest first
    return SparkLanes(config, log)


_HANDED_OUT: set[int] = set()


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low, high = (int(x) for x in f.read().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def _worker_slice(low: int, high: int) -> tuple[int, int]:
    """This pytest-xdist worker's share of ``[low, high)`` (all of it without xdist): "never twice
    in a run" must hold across workers too, and each worker only knows the ports it handed out."""
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    index = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:])
    span = (high - low) // count
    return low + index * span, low + (index + 1) * span


def free_ports(count: int) -> list[int]:
    """Ports that were free a moment ago, for processes that must know each other's addresses
    before they start. Taken below the kernel's ephemeral range and never twice in a run: a client
    of a broker a test killed goes on dialling its port, and if the kernel handed that port to
    another socket (Spark's Python-worker handshake listens on one) the client's bytes would reach
    it (Spark reads gRPC's preface as a 1.3 GB length and dies of OutOfMemoryError)."""
    first, end = _worker_slice(15000, min(_ephemeral_range()[0], 32768))
    rng = random.Random()
    ports: list[int] = []
    while len(ports) < count:
        port = rng.randrange(first, end)
        if port in _HANDED_OUT:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        ports.append(port)
    return ports


class BrokerProcess:
    """A node started with ``python -m broker broker start`` in its own process."""

    def __init__(self, data_dir: str, configs: dict | None = None, port: int = 0,
                 node_id: int | None = None, quorum: str | None = None):
        self.data_dir = data_dir
        # Tests write records stamped long ago (1970, 2023); the broker-wide 7-day retention would
        # delete them at its first pass, active segment included, as Kafka's does. A test of
        # retention sets its own retention.ms on the topic.
        self.configs = {"log.retention.ms": -1, **(configs or {})}
        self.port = port
        self.node_id = node_id
        self.quorum = quorum
        self.proc: subprocess.Popen | None = None
        self.output: list[str] = []

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> "BrokerProcess":
        if not self.port:
            self.port = free_ports(1)[0]
        cmd = [sys.executable, "-m", "broker", "broker", "start", "--data-dir", self.data_dir,
               "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "WARNING"]
        if self.node_id is not None:
            cmd += ["--node-id", str(self.node_id)]
        if self.quorum:
            cmd += ["--controller-quorum", self.quorum]
        for key, value in self.configs.items():
            cmd += ["--config", f"{key}={value}"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     cwd=ROOT, start_new_session=True)
        ready = threading.Event()

        def pump(stream):
            for line in stream:
                self.output.append(line)
                if "listening on" in line and not ready.is_set():
                    self.port = int(line.strip().rsplit(":", 1)[1])
                    ready.set()

        threading.Thread(target=pump, args=(self.proc.stdout,), daemon=True).start()
        deadline = time.monotonic() + timeout
        while not ready.wait(0.05):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("broker did not start:\n" + "".join(self.output))
        return self

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def pause(self) -> None:
        os.kill(self.proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait for a clean exit; a node that hangs has printed its threads' stacks."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                # SIGUSR1: the node prints every thread's stack (faulthandler), then it is killed.
                seen = len(self.output)
                self.proc.send_signal(signal.SIGUSR1)
                deadline = time.monotonic() + 5
                while time.monotonic() < deadline and not any(
                        "most recent call first" in line for line in self.output[seen:]):
                    time.sleep(0.05)
                self.proc.kill()
                self.proc.wait(10)
                raise RuntimeError(f"node {self.node_id} did not stop in {timeout}s:\n"
                                   + "".join(self.output[-400:])) from None
        return self.proc.returncode if self.proc else 0

    def restart(self) -> "BrokerProcess":
        return self.start()


@pytest.fixture
def broker_factory(tmp_path):
    """Start brokers on demand: ``broker_factory(configs={...})``; all are killed afterwards."""
    started: list[BrokerProcess] = []

    def make(configs: dict | None = None, name: str = "broker") -> BrokerProcess:
        b = BrokerProcess(str(tmp_path / f"{name}-{len(started)}"), configs).start()
        started.append(b)
        return b

    yield make
    for b in started:
        b.kill9()


class Cluster:
    """``n`` broker+controller nodes on 127.0.0.1, each in its own process and data directory;
    ``roles`` gives some nodes one role (the quorum's voters are the nodes with the controller's)."""

    def __init__(self, root: str, n: int, configs: dict | None = None, roles: dict[int, str] | None = None):
        ports = free_ports(2 * n)
        roles = roles or {}
        quorum = ",".join(f"{i + 1}@127.0.0.1:{ports[n + i]}" for i in range(n)
                          if "controller" in roles.get(i + 1, "controller"))
        self.nodes = {i + 1: BrokerProcess(os.path.join(root, f"node-{i + 1}"),
                                           {**(configs or {}), "process.roles": roles.get(i + 1, "broker,controller")},
                                           ports[i], i + 1, quorum)
                      for i in range(n)}
        self.brokers = sum(1 for i in range(n) if "broker" in roles.get(i + 1, "broker"))

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.nodes.values() if b.alive)

    def start(self) -> "Cluster":
        for b in self.nodes.values():
            b.start()
        self.wait_for_brokers(self.brokers)
        return self

    def admin(self):
        from broker.client import AdminClient
        return AdminClient({"bootstrap.servers": self.bootstrap, "request.timeout.ms": 5000})

    def describe(self, **options):
        with self.admin() as admin:
            return admin.describe_cluster(**options).result(10)

    def wait_for_brokers(self, count: int, timeout: float = 60.0):
        def ready():
            try:
                info = self.describe()
            except Exception:  # noqa: BLE001 - not up yet
                return None
            active = [n for n in info.nodes if n.broker and not n.fenced]
            return info if len(active) >= count and info.controller is not None else None
        return wait_until(ready, timeout, 0.1, f"{count} active brokers and a controller")

    def partition(self, topic: str, index: int):
        with self.admin() as admin:
            info = admin.list_topics(topic).topics[topic]
            if info.error is not None:
                raise info.error
            return info.partitions[index]

    def kill_all(self) -> None:
        for b in self.nodes.values():
            if b.alive:
                try:
                    b.resume()
                except ProcessLookupError:
                    pass
            b.kill9()


@pytest.fixture
def cluster_factory(tmp_path):
    """Start clusters on demand: ``cluster_factory(3, configs={...})``; all are killed afterwards."""
    made: list[Cluster] = []

    def make(n: int = 3, configs: dict | None = None, roles: dict[int, str] | None = None) -> Cluster:
        c = Cluster(str(tmp_path / f"cluster-{len(made)}"), n, configs, roles)
        made.append(c)
        return c.start()

    yield make
    for c in made:
        c.kill_all()


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    """One broker for a whole test module; tests use their own topic names."""
    b = BrokerProcess(str(tmp_path_factory.mktemp("shared-broker"))).start()
    yield b
    b.kill9()


_topic_counter = iter(range(1_000_000))


@pytest.fixture
def topic_name(request):
    """A topic name unique to this test."""
    base = "".join(c if c.isalnum() else "-" for c in request.node.name)[:60].strip("-")
    return f"{base}-{next(_topic_counter)}"


# One embedded PostgreSQL per session (``postgres``) and a database per test (``pg_db``), for the CDC tests.
from tests.postgres_fixture import pg_db, postgres  # noqa: E402,F401
