"""Bad input to the ``riverlog`` command gives one ``Error:`` line naming the problem, a non-zero
exit status and no traceback (run as a subprocess, as a user would)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

NOWHERE = "127.0.0.1:1"  # commands must fail on their input before connecting anywhere


def riverlog(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([sys.executable, "-m", "broker", *args], cwd=ROOT, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"riverlog {' '.join(args)} accepted its input and kept running:\n"
                             f"{e.stdout!r}\n{e.stderr!r}") from None


def assert_clear_error(proc: subprocess.CompletedProcess, *words: str) -> None:
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "Traceback" not in out, out
    errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, out
    for word in words:
        assert word in errors[0], errors[0]


@pytest.fixture
def start(tmp_path):
    """``start(*args)``: ``riverlog broker start`` with a fresh data dir and a free port unless given."""

    def run(*args: str) -> subprocess.CompletedProcess:
        # Defaults as --config, so both the options and later --config values given here win.
        base = ["--config", f"log.dirs={tmp_path / 'data'}", "--config", "listeners=127.0.0.1:0",
                "--log-level", "ERROR"]
        return riverlog("broker", "start", *base, *args)

    return run


@pytest.mark.parametrize("port", ["99999", "-1", "65536", "http"])
def test_port_out_of_range(start, port):
    assert_clear_error(start("--port", port), "--port", port)


def test_listeners_port_out_of_range_through_config(start):
    assert_clear_error(start("--config", "listeners=127.0.0.1:99999"), "listeners", "99999")


def test_port_in_use(start):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        assert_clear_error(start("--port", port), port, "already in use")


def test_data_dir_is_a_plain_file(start, tmp_path):
    plain = tmp_path / "plain"
    plain.write_text("not a directory")
    assert_clear_error(start("--data-dir", str(plain)), "--data-dir", "is a file")
    assert_clear_error(start("--data-dir", str(plain / "below")), "--data-dir", "is a file")
    assert_clear_error(start("--config", f"log.dirs={plain}"), "log.dirs", "is a file")


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_data_dir_unwritable(start):
    assert_clear_error(start("--data-dir", "/proc/riverlog-data"), "/proc/riverlog-data")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_data_dir_without_write_permission(start, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    assert_clear_error(start("--data-dir", str(locked)), "--data-dir", "not writable")


@pytest.mark.parametrize("quorum", ["abc", "1@localhost", "x@127.0.0.1:9093", "1@127.0.0.1:99999",
                                   "1@127.0.0.1:9093,1@127.0.0.1:9095"])
def test_malformed_controller_quorum(start, quorum):
    assert_clear_error(start("--controller-quorum", quorum), "--controller-quorum")


def test_malformed_quorum_through_config(start):
    assert_clear_error(start("--config", "controller.quorum.voters=abc"), "controller.quorum.voters")


def test_bad_log_level(start):
    assert_clear_error(start("--log-level", "LOUD"), "--log-level")


@pytest.mark.parametrize("when", ["99999999999999999999", "-99999999999999999999", "yesterday-ish"])
def test_offsets_time_out_of_range_or_malformed(when):
    assert_clear_error(riverlog("-b", NOWHERE, "offsets", "orders", "--time", when), "--time")


def test_group_reset_to_datetime_out_of_range():
    assert_clear_error(riverlog("-b", NOWHERE, "groups", "reset-offsets", "g", "--topic", "t",
                                "--to-datetime", "99999999999999999999"), "--to-datetime")


@pytest.mark.parametrize("args, option", [
    (["topics", "create", "t", "--partitions", "99999999999"], "--partitions"),
    (["topics", "create", "t", "--replication-factor", "99999"], "--replication-factor"),
    (["topics", "alter", "t", "--partitions", "0"], "--partitions"),
    (["consume", "t", "--partition", "-2"], "--partition"),
    (["consume", "t", "--max-messages", "-5"], "--max-messages"),
    (["consume", "t", "--partition", "0", "--offset", "99999999999999999999"], "--offset"),
    (["produce", "t", "--partition", "99999999999"], "--partition"),
    (["delete-records", "t", "--offset", "-7"], "--offset"),
    (["transactions", "describe-producers", "--topic", "t", "--partition", "-1"], "--partition"),
    (["cluster", "start", "--nodes", "0", "--data-dir", "."], "--nodes"),
    (["cluster", "start", "--base-port", "65533", "--data-dir", "."], "--base-port"),
])
def test_numbers_out_of_range(args, option):
    assert_clear_error(riverlog("-b", NOWHERE, *args), option)
