"""``riverlog produce`` / ``consume`` take Kafka's console tools' ``--property`` names end to end,
and ``consume --group`` consumes as a group member (ConsoleConsumer subscribes when given a group,
and commits what it printed); ``--include`` subscribes to a pattern."""
from __future__ import annotations

import subprocess
import sys

import pytest

from broker.client import AdminClient, ConsumerGroupTopicPartitions, Producer
from tests.conftest import ROOT
from tests.integration.test_cli import cli, create_topic, lines  # noqa: F401 - cli is a fixture

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_properties_of_the_console_producer_and_consumer(cli, shared_broker, topic_name):
    create_topic(shared_broker.bootstrap, topic_name)
    cli("produce", "--topic", topic_name, "--property", "parse.key=true", "--property", "parse.headers=true",
        "--property", "null.marker=~", "--property", "key.separator=|",
        input="h1:a,h2:~\tk1|v1\n~\t~|v2\nh3:c\tk3|~\n")
    out = cli("consume", topic_name, "--from-beginning", "--max-messages", 3, "--property", "print.key=true",
              "--property", "print.headers=true", "--property", "print.offset=true",
              "--property", "null.literal=<null>", "--property", "headers.separator=;").stdout
    assert lines(out) == ["Offset:0\th1:a;h2:<null>\tk1\tv1", "Offset:1\tNO_HEADERS\t<null>\tv2",
                          "Offset:2\th3:c\tk3\t<null>"]
    bad = cli("consume", topic_name, "--property", "print.keys=true", check=False)
    assert bad.returncode == 2 and "unknown formatter property print.keys" in bad.stderr, bad.stderr
    stopped = cli("produce", topic_name, "--property", "parse.headers=true", input="h:1\tv\nno-headers\n",
                  check=False)
    assert stopped.returncode == 1 and "No headers delimiter found on line number 2: 'no-headers'" in stopped.stderr


def test_consume_with_a_group_commits_what_it_printed(cli, shared_broker, topic_name):
    create_topic(shared_broker.bootstrap, topic_name, partitions=2)
    cli("produce", topic_name, "--partition", 0, input="a\nb\nc\n")
    group = f"{topic_name}-g"
    first = cli("consume", topic_name, "--group", group, "--from-beginning", "--max-messages", 2)
    assert len(lines(first.stdout)) == 2
    with AdminClient({"bootstrap.servers": shared_broker.bootstrap}) as admin:
        committed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    assert {tp.partition: tp.offset for tp in committed.topic_partitions if tp.offset >= 0} == {0: 2, 1: 0}
    create_topic(shared_broker.bootstrap, f"{topic_name}-other")
    cli("produce", f"{topic_name}-other", input="d\n")
    included = cli("consume", "--include", f"{topic_name}(-other)?", "--from-beginning", "--max-messages", 4)
    assert sorted(lines(included.stdout)) == ["a", "b", "c", "d"]
    both = cli("consume", topic_name, "--group", group, "--partition", 0, check=False)
    assert both.returncode == 2 and "Options group and partition cannot be specified together." in both.stderr


def test_consume_stops_quietly_when_nobody_reads_its_output(shared_broker, topic_name):
    """ConsoleConsumer.checkErr: output that can no longer be written (``consume | head -1``) closes
    the consumer with one line and the count, not an error about paths."""
    create_topic(shared_broker.bootstrap, topic_name)
    with Producer({"bootstrap.servers": shared_broker.bootstrap}) as p:
        p.produce(topic_name, value=b"first", partition=0)
        assert p.flush(10) == 0
        child = subprocess.Popen([sys.executable, "-m", "broker", "-b", shared_broker.bootstrap, "consume", topic_name,
                                  "--from-beginning"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            assert child.stdout.readline() == b"first\n"
            child.stdout.close()                  # as `head -1` does after its line
            p.produce(topic_name, value=b"second", partition=0)
            assert p.flush(10) == 0
            err = child.stderr.read().decode()
            assert child.wait(60) == 0, err
        finally:
            if child.poll() is None:
                child.kill()
    assert "Unable to write to standard out, closing consumer." in err and "Processed a total of 2 messages" in err
    assert "path" not in err and "Traceback" not in err and "Exception ignored" not in err, err


def test_any_command_stops_quietly_when_nobody_reads_its_output(shared_broker, topic_name):
    """A command whose reader went away (``riverlog topics describe ... | head -1``) ends with
    status 0 and nothing on stderr, as Kafka's tools do, not "Broken pipe; check the path"."""
    create_topic(shared_broker.bootstrap, topic_name, partitions=40)
    for _ in range(3):
        child = subprocess.run(f"{sys.executable} -m broker -b {shared_broker.bootstrap} topics describe {topic_name} "
                               "| head -c 1 > /dev/null; exit ${PIPESTATUS[0]}", shell=True, cwd=ROOT,
                               executable="/bin/bash", stderr=subprocess.PIPE, timeout=60)
        assert child.returncode == 0 and b"Broken pipe" not in child.stderr, child.stderr


def test_a_preferred_election_that_needs_none_is_not_a_failure(cli, shared_broker, topic_name):
    """kafka-leader-election: "Valid replica already elected for partitions ..." and status 0."""
    create_topic(shared_broker.bootstrap, topic_name, partitions=2)
    out = cli("topics", "elect-leaders", topic_name, "--partition", 0)
    assert out.stdout.strip() == f"Valid replica already elected for partitions {topic_name}-0"
    everything = cli("topics", "elect-leaders", topic_name)
    assert everything.stdout.strip() == f"Valid replica already elected for partitions {topic_name}-0, {topic_name}-1"
