"""Shared fixtures: real broker processes on 127.0.0.1 with temporary data directories."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


class BrokerProcess:
    """A broker started with ``python -m broker broker start`` in its own process."""

    def __init__(self, data_dir: str, configs: dict | None = None, port: int = 0):
        self.data_dir = data_dir
        self.configs = dict(configs or {})
        self.port = port
        self.proc: subprocess.Popen | None = None
        self.output: list[str] = []

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> "BrokerProcess":
        cmd = [sys.executable, "-m", "broker", "broker", "start", "--data-dir", self.data_dir,
               "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "WARNING"]
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

    def kill9(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self, timeout: float = 30.0) -> int:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            return self.proc.wait(timeout)
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
