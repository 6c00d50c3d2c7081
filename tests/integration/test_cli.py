"""The ``riverlog`` command line, run as a subprocess against a real broker process."""
from __future__ import annotations

import datetime as dt
import signal
import subprocess
import sys
import time

import pytest

from broker.client import OFFSET_BEGINNING, AdminClient, Consumer, NewTopic, TopicPartition
from tests.conftest import ROOT, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


# ----------------------------------------------------------------------------------- helpers
@pytest.fixture
def cli(shared_broker):
    """``cli(*args, input=None, check=True)`` runs ``riverlog -b <shared broker> *args``."""

    def run(*args, input=None, check=True):
        return run_cli(shared_broker.bootstrap, *args, input=input, check=check)

    return run


def run_cli(bootstrap: str, *args, input: bytes | str | None = None, check: bool = True,
            timeout: float = 90) -> subprocess.CompletedProcess:
    """Run ``python -m broker --bootstrap-server BOOTSTRAP *args``; text stdout/stderr.

    With ``check`` a non-zero exit fails the test showing both streams.
    """
    if isinstance(input, str):
        input = input.encode()
    # -X faulthandler: a run that hangs is ended with SIGABRT, so its threads' stacks are in the failure.
    child = subprocess.Popen([sys.executable, "-X", "faulthandler", "-m", "broker", "--bootstrap-server",
                              bootstrap, *map(str, args)], cwd=ROOT, stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = child.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        child.send_signal(signal.SIGABRT)
        out, err = child.communicate()
        raise AssertionError(f"riverlog {' '.join(map(str, args))} did not exit within {timeout} s; "
                             f"its threads:\n{err.decode(errors='backslashreplace')}") from None
    proc = subprocess.CompletedProcess(child.args, child.returncode, out, err)
    proc.stdout = proc.stdout.decode("utf-8", errors="backslashreplace")
    proc.stderr = proc.stderr.decode("utf-8", errors="backslashreplace")
    if check and proc.returncode != 0:
        raise AssertionError(f"riverlog {' '.join(map(str, args))} exited {proc.returncode}\n"
                             f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return proc


def lines(text: str) -> list[str]:
    return text.splitlines()


def listed_topics(cli) -> list[str]:
    return lines(cli("topics", "list").stdout)


def describe(cli, name: str) -> tuple[dict[str, str], list[dict[str, str]]]:
    """``topics describe NAME`` parsed into (topic fields, [partition fields...])."""
    out = lines(cli("topics", "describe", name).stdout)
    assert out, "describe printed nothing"

    def fields(line: str) -> dict[str, str]:
        return dict(f.split(": ", 1) if ": " in f else (f.rstrip(":"), "") for f in line.strip("\t").split("\t"))

    head, parts = fields(out[0]), [fields(line) for line in out[1:]]
    assert not out[0].startswith("\t") and all(line.startswith("\t") for line in out[1:]), out
    return head, parts


def configs_of(head: dict[str, str]) -> dict[str, str]:
    raw = head.get("Configs", "")
    return dict(item.split("=", 1) for item in raw.split(",") if item)


def create_topic(bootstrap: str, name: str, partitions: int = 1, **config) -> None:
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.create_topics([NewTopic(name, partitions, 1, config)])[name].result(30)


def read_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 60) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    out = []
    try:
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            out.extend(m for m in consumer.consume(10_000, 1.0) if m.error() is None)
    finally:
        consumer.close()
    return out


def offsets_map(text: str, topic: str) -> dict[int, int]:
    out = {}
    for line in lines(text):
        name, part, off = line.rsplit(":", 2)
        assert name == topic, line
        out[int(part)] = int(off)
    return out


# ----------------------------------------------------------------------------------- topics
def test_create_list_describe(cli, topic_name):
    res = cli("topics", "create", topic_name, "--partitions", 3, "--config", "retention.ms=1000")
    assert f"Created topic {topic_name}." in res.stdout
    assert topic_name in listed_topics(cli)

    head, parts = describe(cli, topic_name)
    assert head["Topic"] == topic_name
    assert head["PartitionCount"] == "3"
    assert head["ReplicationFactor"] == "1"
    assert configs_of(head).get("retention.ms") == "1000"
    assert [p["Partition"] for p in parts] == ["0", "1", "2"]
    for p in parts:
        assert p["Topic"] == topic_name
        assert int(p["Leader"]) >= 0
        assert p["Replicas"] == p["Leader"]
        assert p["Isr"] == p["Leader"]


def test_create_existing_topic_fails_unless_if_not_exists(cli, topic_name):
    cli("topics", "create", topic_name, "--partitions", 2)

    again = cli("topics", "create", topic_name, "--partitions", 2, check=False)
    assert again.returncode == 1
    assert "TOPIC_ALREADY_EXISTS" in again.stderr
    assert "Traceback" not in again.stderr

    quiet = cli("topics", "create", topic_name, "--partitions", 5, "--if-not-exists")
    assert quiet.returncode == 0
    head, _ = describe(cli, topic_name)
    assert head["PartitionCount"] == "2", "--if-not-exists must not change the existing topic"
    assert listed_topics(cli).count(topic_name) == 1


def test_create_invalid_topic_name(cli):
    res = cli("topics", "create", "bad name!", check=False)
    assert res.returncode == 1
    assert "INVALID_TOPIC" in res.stderr
    assert "Traceback" not in res.stderr
    assert "bad name!" not in listed_topics(cli)


def test_alter_configs(cli, topic_name):
    cli("topics", "create", topic_name, "--config", "retention.ms=1000")
    assert configs_of(describe(cli, topic_name)[0]) == {"retention.ms": "1000"}

    res = cli("topics", "alter", topic_name, "--add-config", "segment.bytes=2048",
              "--delete-config", "retention.ms")
    assert f"Altered configs of topic {topic_name}." in res.stdout
    assert configs_of(describe(cli, topic_name)[0]) == {"segment.bytes": "2048"}


def test_alter_unknown_config_key_fails(cli, topic_name):
    cli("topics", "create", topic_name)
    res = cli("topics", "alter", topic_name, "--add-config", "no.such.config=1", check=False)
    assert res.returncode == 1
    assert "INVALID_CONFIG" in res.stderr
    assert "Traceback" not in res.stderr
    assert configs_of(describe(cli, topic_name)[0]) == {}


def test_delete_topic(cli, topic_name):
    cli("topics", "create", topic_name)
    assert topic_name in listed_topics(cli)
    res = cli("topics", "delete", topic_name)
    assert f"Deleted topic {topic_name}." in res.stdout
    wait_until(lambda: topic_name not in listed_topics(cli), 20, message="topic to leave topics list")
    gone = cli("topics", "describe", topic_name, check=False)
    assert gone.returncode == 1 and "UNKNOWN_TOPIC_OR_PARTITION" in gone.stderr


def test_delete_unknown_topic_fails(cli, topic_name):
    res = cli("topics", "delete", topic_name, check=False)
    assert res.returncode == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in res.stderr
    assert "Traceback" not in res.stderr


# ----------------------------------------------------------------------------------- produce / consume
def test_produce_stdin_with_keys_and_headers_then_consume(cli, shared_broker, topic_name):
    cli("topics", "create", topic_name, "--partitions", 1)
    # as Kafka's console producer, a line without the separator stops it (the lines before are sent)
    stopped = cli("produce", topic_name, "--key-separator", ":", input=b"k0:v0\nnokey\n", check=False)
    assert stopped.returncode == 1 and "No key separator found on line number 2: 'nokey'" in stopped.stderr, stopped.stderr
    res = cli("produce", topic_name, "--key-separator", ":", "--ignore-error", "--header", "source=cli",
              input=b"k1:v1\nk2:v2\nnokey\nk4:v:4\n")
    assert "Produced 4 record(s)" in res.stderr

    out = cli("consume", topic_name, "--from-beginning", "--max-messages", 5, "--print-key", "--print-headers")
    assert lines(out.stdout) == [
        "NO_HEADERS\tk0\tv0",
        "source:cli\tk1\tv1",
        "source:cli\tk2\tv2",
        "source:cli\tnull\tnokey",
        "source:cli\tk4\tv:4",
    ]
    assert "Processed a total of 5 messages" in out.stderr

    # the records really are on the broker with these keys, values and headers
    msgs = read_all(shared_broker.bootstrap, topic_name, 1, 5)[1:]
    assert [(m.key(), m.value()) for m in msgs] == [(b"k1", b"v1"), (b"k2", b"v2"), (None, b"nokey"),
                                                   (b"k4", b"v:4")]
    assert all(list(m.headers()) == [("source", b"cli")] for m in msgs)


def test_produce_to_unknown_topic_creates_it(cli, topic_name):
    # auto.create.topics.enable is true by default, as Kafka's (tests/integration/test_kafka_habits.py
    # covers a broker with it off, where the records fail after topic.metadata.propagation.max.ms)
    res = cli("produce", topic_name, "--config", "topic.metadata.propagation.max.ms=1000", input="a\n")
    assert res.returncode == 0
    assert topic_name in listed_topics(cli)


def test_consume_partition_and_offset(cli, topic_name):
    cli("topics", "create", topic_name, "--partitions", 2)
    cli("produce", topic_name, "--partition", 0, input="a0\na1\na2\n")
    cli("produce", topic_name, "--partition", 1, input="b0\nb1\nb2\nb3\n")

    p1 = cli("consume", topic_name, "--partition", 1, "--from-beginning", "--max-messages", 4)
    assert lines(p1.stdout) == ["b0", "b1", "b2", "b3"]

    p0 = cli("consume", topic_name, "--partition", 0, "--offset", 1, "--max-messages", 2, "--print-offset",
             "--print-partition")
    assert lines(p0.stdout) == ["Partition:0\tOffset:1\ta1", "Partition:0\tOffset:2\ta2"]

    # Kafka's console consumer: earliest/latest/offset >= 0; past the end waits at the end (it read
    # from the start before); --offset with --from-beginning is refused
    assert lines(cli("consume", topic_name, "-p", 0, "-o", "earliest", "-n", 1).stdout) == ["a0"]
    assert lines(cli("consume", topic_name, "-p", 0, "-o", 100, "--timeout-ms", 1500).stdout) == []
    both = cli("consume", topic_name, "-p", 0, "-o", 1, "--from-beginning", check=False)
    assert both.returncode == 2 and "Options from-beginning and offset cannot be specified together." in both.stderr
    assert cli("consume", topic_name, "-p", 0, "-o", -2, check=False).returncode == 2

    needs_partition = cli("consume", topic_name, "--offset", 1, "--max-messages", 1, check=False)
    assert needs_partition.returncode != 0
    assert "The partition is required when offset is specified." in needs_partition.stderr


def test_consume_timeout_ends_when_nothing_arrives(cli, topic_name):
    cli("topics", "create", topic_name)
    cli("produce", topic_name, input="only\n")

    started = time.monotonic()
    res = cli("consume", topic_name, "--from-beginning", "--timeout-ms", 1500)
    assert time.monotonic() - started < 60
    assert lines(res.stdout) == ["only"]
    assert "Processed a total of 1 messages" in res.stderr

    # default start is the end: nothing to read, the timeout ends it with zero records
    empty = cli("consume", topic_name, "--timeout-ms", 500)
    assert empty.stdout == ""
    assert "Processed a total of 0 messages" in empty.stderr


def test_consume_print_timestamp(cli, topic_name):
    cli("topics", "create", topic_name)
    before = int(time.time() * 1000)
    cli("produce", topic_name, input="x\ny\n")
    after = int(time.time() * 1000)

    res = cli("consume", topic_name, "--from-beginning", "--max-messages", 2, "--print-timestamp")
    out = lines(res.stdout)
    assert len(out) == 2
    for line, value in zip(out, ["x", "y"]):
        stamp, printed = line.split("\t")
        assert printed == value
        kind, ms = stamp.split(":")
        assert kind == "CreateTime"
        assert before - 1000 <= int(ms) <= after + 1000


def test_produce_file_with_progress(cli, shared_broker, topic_name, tmp_path):
    cli("topics", "create", topic_name, "--partitions", 3)
    n = 2000
    path = tmp_path / "events.txt"
    path.write_text("".join(f"event-{i}\n" for i in range(n)))

    res = cli("produce", topic_name, "--file", path)
    assert f"Produced {n} record(s) to {topic_name}." in res.stderr
    assert res.stdout == ""

    msgs = read_all(shared_broker.bootstrap, topic_name, 3, n)
    assert sorted(m.value() for m in msgs) == sorted(f"event-{i}".encode() for i in range(n))

    consumed = cli("consume", topic_name, "--from-beginning", "--max-messages", n)
    assert len(lines(consumed.stdout)) == n
    assert set(lines(consumed.stdout)) == {f"event-{i}" for i in range(n)}

    latest = offsets_map(cli("offsets", topic_name).stdout, topic_name)
    assert sum(latest.values()) == n


# ----------------------------------------------------------------------------------- offsets
def test_offsets(cli, topic_name):
    cli("topics", "create", topic_name, "--partitions", 2)
    before = int(time.time() * 1000) - 5_000
    cli("produce", topic_name, "--partition", 0, input="a\nb\nc\n")
    cli("produce", topic_name, "--partition", 1, input="d\n")

    latest = cli("offsets", topic_name)
    assert lines(latest.stdout) == [f"{topic_name}:0:3", f"{topic_name}:1:1"]
    assert offsets_map(cli("offsets", topic_name, "--time", "latest").stdout, topic_name) == {0: 3, 1: 1}

    assert offsets_map(cli("offsets", topic_name, "--time", "earliest").stdout, topic_name) == {0: 0, 1: 0}

    future = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=365)).replace(tzinfo=None)
    later = cli("offsets", topic_name, "--time", future.isoformat(timespec="seconds"))
    assert offsets_map(later.stdout, topic_name) == {}     # kafka-get-offsets leaves out "no offset"

    earlier = cli("offsets", topic_name, "--time", before)
    assert offsets_map(earlier.stdout, topic_name) == {0: 0, 1: 0}

    one = cli("offsets", topic_name, "--partition", 0)
    assert lines(one.stdout) == [f"{topic_name}:0:3"]


def test_offsets_unknown_topic_fails(cli, topic_name):
    res = cli("offsets", topic_name, check=False)
    assert res.returncode == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in res.stderr


# ----------------------------------------------------------------------------------- broker
def test_broker_start_help():
    res = subprocess.run([sys.executable, "-m", "broker", "broker", "start", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    for option in ("--data-dir", "--port", "--config", "--node-id"):
        assert option in res.stdout


def test_broker_num_partitions_default(broker_factory):
    b = broker_factory(configs={"num.partitions": 2})
    res = run_cli(b.bootstrap, "topics", "create", "x")
    assert "Created topic x." in res.stdout
    head, parts = describe(lambda *a, **k: run_cli(b.bootstrap, *a, **k), "x")
    assert head["PartitionCount"] == "2"
    assert [p["Partition"] for p in parts] == ["0", "1"]
    assert run_cli(b.bootstrap, "offsets", "x").stdout.splitlines() == ["x:0:0", "x:1:0"]
