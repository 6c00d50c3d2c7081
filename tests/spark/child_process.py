"""What the fault tests' child processes share: a SparkSession built inside the child, and one
life of a child run until it exits or is killed at a crash point.

A test that SIGKILLs a Spark application needs it in its own process (a JVM of its own); each
child builds its session as ``tests/spark/conftest.py`` builds the suite's, and runs in its own
process group so that killing it takes its JVM along.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from spark_sink.crash_points import ENV as CRASH_ENV

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIFE_TIMEOUT_S = 420  # a life is a JVM, a SparkSession and its queries: minutes on a loaded 2-core machine
# Kafka's record cache off, for streams tests that compare every update with the test driver
# (which commits per record); tests/spark/test_streams_oracle.py checks the cache against it.
EVERY_UPDATE = {"statestore.cache.max.bytes": 0}
# Every test JVM: HotSpot's C1 compiler alone (no C2 threads competing with the queries for two
# cores) and the serial collector. A killed life starts its first batch about 5 s sooner in a 30 s
# life (a streams application's, 3 runs each way); the suite's own session, whose queries are many
# and small (planning and generated code, not hot loops), used 19% less CPU over three Spark
# modules (276 -> 224 s, 2 runs each way alternating, wall 198 -> 189 s).
TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# Two threads, and a failed task tried once more as a cluster would (its spark.task.maxFailures is
# 4; local mode's is 1, so one task failing for a reason outside the test, as a shuffle task once
# did while its closure was deserialised on a loaded machine, ended a life the test meant to kill
# later). A failure of the application's own fails the retry too, and the life with it.
CHILD_MASTER = "local[2,2]"


def spark_home_without_its_python() -> str:
    """A SPARK_HOME for a child's JVM: the installed pyspark's own (bin, jars, ... linked), without
    its ``python`` directory. Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on every
    Python worker's path, and a module imported from a zip is compiled again in each process (no
    bytecode is kept for it): about 0.6 s of CPU per worker, and a life starts some thirty (data
    source planners, readers, writers, commits, UDFs, state drivers). Without it a worker imports
    the same release's pyspark from the installed package, its bytecode kept. Made once per
    machine and release, by whichever life comes first."""
    import pyspark
    from pyspark.find_spark_home import _find_spark_home
    real = _find_spark_home()
    home = os.path.join(tempfile.gettempdir(), f"riverlog-spark-home-{pyspark.__version__}-"
                        f"{hashlib.sha1(real.encode()).hexdigest()[:12]}")
    if not os.path.isdir(home):
        staging = tempfile.mkdtemp(prefix="riverlog-spark-home-")
        for name in os.listdir(real):
            if name != "python":
                os.symlink(os.path.join(real, name), os.path.join(staging, name))
        try:
            os.rename(staging, home)
        except OSError:   # another life made it first
            shutil.rmtree(staging)
    return home


def child_spark(app_name: str, shuffle_partitions: int = 2, warehouse: str | None = None):
    """The child's SparkSession: local[2], its Python workers on this interpreter and checkout."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))
    os.environ["SPARK_HOME"] = spark_home_without_its_python()
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    from pyspark.sql import SparkSession
    builder = (SparkSession.builder.master(CHILD_MASTER).appName(app_name)
               .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.driver.memory", "1g")
               .config("spark.driver.extraJavaOptions", TEST_JVM_OPTIONS))
    if warehouse is not None:
        builder = builder.config("spark.sql.warehouse.dir", warehouse)
    return builder.getOrCreate()


# Set in a life started ahead (:func:`start_life`): :func:`run_streams_app` builds its SparkSession,
# then waits for a line on stdin before it touches the broker or the state directory.
GATE_ENV = "RIVERLOG_TEST_LIFE_GATE"
READY = "waiting for its turn"


class Life:
    """A life's process started ahead of its turn: its cold start (the interpreter, PySpark, a JVM
    and its SparkSession: about 7 s of a 30 s life, measured) overlaps the life before it, which
    it waits for (:meth:`run`) before it reads or writes anything. Its crash point is armed from
    its start, as a life's that is not started ahead."""

    def __init__(self, args: list[str], log_path, crash: str | None, what: str):
        env = {k: v for k, v in os.environ.items() if k != CRASH_ENV}
        if crash is not None:
            env[CRASH_ENV] = crash
        env[GATE_ENV] = "1"
        self.log_path, self.crash, self.what = log_path, crash, what
        with open(log_path, "w") as log:
            self.proc = subprocess.Popen([sys.executable, *args], env=env, stdin=subprocess.PIPE, stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout_s: float = LIFE_TIMEOUT_S) -> None:
        """Until its session is built (or it ended): the next life is started after this one's cold
        start, not beside it (two cold starts at once slowed the first more than the second gained)."""
        deadline = time.monotonic() + timeout_s
        while self.proc.poll() is None and time.monotonic() < deadline:
            with open(self.log_path, errors="replace") as f:
                if READY in f.read():
                    return
            time.sleep(0.1)

    def run(self, timeout_s: float = LIFE_TIMEOUT_S) -> None:
        """Let the life go, and wait for it as :func:`run_life`."""
        try:
            self.proc.stdin.write(b"go\n")
            self.proc.stdin.close()
        except BrokenPipeError:
            pass   # it ended already: its code and log say why
        _wait_life(self.proc, self.log_path, self.crash, self.what, timeout_s)

    def kill(self) -> None:
        """A life that never got its turn (the test failed before it)."""
        if self.proc.poll() is None:
            _kill_group(self.proc)


def start_life(args: list[str], log_path, crash: str | None, what: str) -> Life:
    """``python args...`` started now, to :meth:`Life.run` later (a script that calls
    :func:`wait_for_turn` once its session is built, as :func:`run_streams_app` does)."""
    return Life(args, log_path, crash, what)


def wait_for_turn() -> None:
    """In a life started ahead (:class:`Life`): wait until the life before it has ended."""
    if os.environ.get(GATE_ENV):
        print(READY, flush=True)
        sys.stdin.readline()


def run_life(args: list[str], log_path, crash: str | None, what: str, timeout_s: float = LIFE_TIMEOUT_S) -> None:
    """Run ``python args...`` to its end, or until it dies with SIGKILL at ``crash`` (a crash
    point, see ``spark_sink.crash_points``); any other ending fails with the log's tail."""
    env = {k: v for k, v in os.environ.items() if k not in (CRASH_ENV, GATE_ENV)}
    if crash is not None:
        env[CRASH_ENV] = crash
    with open(log_path, "w") as log:
        proc = subprocess.Popen([sys.executable, *args], env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    _wait_life(proc, log_path, crash, what, timeout_s)


def _kill_group(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the life's own group: a JVM left behind
    except ProcessLookupError:
        pass
    proc.wait(10)


def _wait_life(proc, log_path, crash: str | None, what: str, timeout_s: float) -> None:
    try:
        code = proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        if proc.poll() is None or crash is None:
            _kill_group(proc)
    want = -signal.SIGKILL if crash is not None else 0
    if code != want:
        with open(log_path) as f:
            excerpt = failure_excerpt(f.readlines())
        raise AssertionError(f"{what} (crash at {crash}) ended with {code}, expected {want}:\n{excerpt}")


# Where a cause starts, the likeliest first: an executor's task failure is logged as an ERROR
# (with the Python worker's traceback in it) before the driver's exception reaches the life's end.
FIRST_ERROR = (" ERROR ", "Traceback (most recent call last)")


def failure_excerpt(lines: list[str], first: int = 40, last: int = 30) -> str:
    """The log's first error with what follows it, then its tail: a failed Spark query ends its
    log with the JVM's stack (the tail), while the cause (a Python traceback, the task's exception)
    comes first and scrolls far above it."""
    start = next((i for marker in FIRST_ERROR for i, line in enumerate(lines) if marker in line), None)
    if start is None or start + first >= len(lines) - last:
        return "".join(lines[-(first + last):])
    return "".join([*lines[start:start + first], "[...]\n", *lines[-last:]])


def run_streams_app(app_name: str, shuffle_partitions: int, make_topology, config: dict) -> None:
    """A child's whole life as a streams application: process what is available, close, exit.
    ``make_topology()`` is called once the session exists (a topology may build Spark columns)."""
    spark = child_spark(app_name, shuffle_partitions, os.path.join(config["state.dir"], "..", "warehouse"))
    import spark_source
    spark_source.register(spark)
    wait_for_turn()
    process_available(spark, make_topology(), config)
    print("processed", flush=True)
    spark.stop()


def process_available(spark, topology, config: dict) -> None:
    """One life of a streams application in ``spark``: process what is available, then close. A
    life that is not to be killed runs in the test's own session: a child's JVM, cold, spends
    about 20 s starting and on its first batch (measured), which a warm one does not."""
    from streams.app import StreamsApp
    app = StreamsApp(topology, spark, config).start()
    try:
        app.processAllAvailable()
    finally:
        app.close()
