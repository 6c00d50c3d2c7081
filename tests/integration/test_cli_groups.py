"""``riverlog groups``: list, describe with lag (one group, several, ``--all-groups``, ``--state``),
reset offsets (dry run, execute, refusal, several groups, ``--export``/``--from-file``), delete."""
from __future__ import annotations

import datetime as dt
import time

import pytest

from broker.client import AdminClient, Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from tests.conftest import wait_until
from tests.integration.test_cli import create_topic, lines, run_cli

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def cli(shared_broker):
    def run(*args, check=True):
        return run_cli(shared_broker.bootstrap, *args, check=check)
    return run


def _produce(bootstrap, topic, n, timestamp=None):
    with Producer({"bootstrap.servers": bootstrap}) as p:
        for i in range(n):
            p.produce(topic, value=b"%d" % i, partition=i % 2, timestamp=timestamp or 0)
        assert p.flush(10) == 0


def _rows(text: str) -> list[list[str]]:
    out = [line.split() for line in lines(text)]
    header = next(i for i, r in enumerate(out) if r and r[0] == "GROUP")
    return [r for r in out[header + 1:] if r and not r[0].startswith("(")]


def _commit(bootstrap, group, topic, offsets):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    c.close()


def test_describe_shows_committed_offsets_and_lag(cli, shared_broker, topic_name):
    create_topic(shared_broker.bootstrap, topic_name, partitions=2)
    _produce(shared_broker.bootstrap, topic_name, 10)
    _commit(shared_broker.bootstrap, "lagging", topic_name, {0: 2, 1: 5})
    assert "lagging" in lines(cli("groups", "list").stdout)
    # kafka-consumer-groups --list --state [STATES]: Kafka's GROUP STATE table, filtered by state
    listed = [line.split() for line in lines(cli("groups", "list", "--state", "empty,Stable").stdout)]
    assert listed[0] == ["GROUP", "STATE"] and ["lagging", "Empty"] in listed[1:], listed
    assert ["lagging", "Empty"] not in [line.split() for line in lines(cli("groups", "list", "--state",
                                                                           "Stable").stdout)]
    bad = cli("groups", "list", "--state", "Sleepy", check=False)
    assert bad.returncode == 2 and "Invalid state list 'Sleepy'. Valid states are: " in bad.stderr, bad.stderr
    rows = _rows(cli("groups", "describe", "lagging").stdout)
    assert [r[:6] for r in rows] == [["lagging", topic_name, "0", "2", "5", "3"],
                                    ["lagging", topic_name, "1", "5", "5", "0"]]


def test_describe_members_of_a_running_group(cli, shared_broker, topic_name):
    create_topic(shared_broker.bootstrap, topic_name, partitions=2)
    c = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": "running", "group.instance.id": "pod-3"})
    c.subscribe([topic_name])
    try:
        wait_until(lambda: c.poll(0.05) is None and len(c.assignment()) == 2, 30, 0.01, "an assignment")
        # Kafka's --members --verbose view: GROUP CONSUMER-ID GROUP-INSTANCE-ID HOST CLIENT-ID #PARTITIONS ASSIGNMENT
        out = lines(cli("groups", "describe", "running", "--members", "--verbose").stdout)
        assert out[0] == "" and out[1].split() == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID",
                                                   "#PARTITIONS", "ASSIGNMENT"], out
        row = out[2].split()
        # HOST: the member's connection address, as Kafka prints it (InetAddress.toString())
        assert (row[0], row[2], row[3], row[5], row[6]) == ("running", "pod-3", "/127.0.0.1", "2",
                                                            f"{topic_name}(0,1)"), out
        offsets = _rows(cli("groups", "describe", "running").stdout)
        assert [r[2] for r in offsets] == ["0", "1"] and {r[6] for r in offsets} == {row[1]}, offsets
        assert {r[7] for r in offsets} == {"/127.0.0.1"}, offsets
        assert len(offsets[0]) == 9, offsets      # ... LAG CONSUMER-ID HOST CLIENT-ID
        # Kafka's --state view: GROUP, COORDINATOR (ID), ASSIGNMENT-STRATEGY, STATE, #MEMBERS
        out = lines(cli("groups", "describe", "running", "--state").stdout)
        assert out[1].split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"], out
        row = out[2].split()
        assert row[0] == "running" and row[1].startswith("127.0.0.1:") and row[-2:] == ["Stable", "1"], out
        refused = cli("groups", "reset-offsets", "running", "--topic", topic_name, "--to-earliest", "--execute",
                      check=False)
        assert refused.returncode == 1 and "NON_EMPTY_GROUP" in refused.stderr, refused.stderr
        assert "group 'running' is inactive, but the current state is Stable" in refused.stderr, refused.stderr
        refused = cli("groups", "delete", "running", check=False)
        assert refused.returncode == 1 and "NON_EMPTY_GROUP" in refused.stderr, refused.stderr
    finally:
        c.close()


def test_reset_offsets_dry_run_then_execute(cli, shared_broker, topic_name):
    create_topic(shared_broker.bootstrap, topic_name, partitions=2)
    old = int((time.time() - 3600) * 1000)
    _produce(shared_broker.bootstrap, topic_name, 10, timestamp=old)   # 5 per partition, an hour ago
    _produce(shared_broker.bootstrap, topic_name, 4)                   # 2 per partition, now
    _commit(shared_broker.bootstrap, "resetting", topic_name, {0: 6, 1: 6})

    def plan(*how):
        return {int(r[2]): int(r[3]) for r in _rows(cli("groups", "reset-offsets", "resetting", "--topic", topic_name,
                                                        *how).stdout)}
    assert plan("--to-earliest") == {0: 0, 1: 0}
    # printOffsetsToReset: stdout holds only the plan (an empty line, the header, the rows), as a
    # script reads it; without --dry-run the warning goes to stderr, with it there is none
    implicit = cli("groups", "reset-offsets", "resetting", "--topic", f"{topic_name}:1", "--to-latest")
    assert [line.split() for line in lines(implicit.stdout)] == [
        [], ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], ["resetting", topic_name, "1", "7"]], implicit.stdout
    assert "No action will be performed as the --execute option is missing" in implicit.stderr, implicit.stderr
    explicit = cli("groups", "reset-offsets", "resetting", "--topic", f"{topic_name}:1", "--to-latest", "--dry-run")
    assert explicit.stdout == implicit.stdout and explicit.stderr == "", explicit.stderr
    assert plan("--to-latest") == {0: 7, 1: 7}
    assert plan("--shift-by", "-2") == {0: 4, 1: 4}
    assert plan("--to-offset", "100") == {0: 7, 1: 7}   # clamped to the log end
    half_hour_ago = dt.datetime.fromtimestamp(time.time() - 1800, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S")
    assert plan("--to-datetime", half_hour_ago) == {0: 5, 1: 5}
    assert plan("--by-duration", "PT2H") == {0: 0, 1: 0}
    # As Kafka's tool: "t:" (an empty partition list) and a date-time without its 'T' are refused;
    # they reset every partition, or to the epoch ("2024" read as 2024 ms).
    for bad in (("--topic", f"{topic_name}:", "--to-earliest"), ("--topic", f"{topic_name}:x", "--to-earliest"),
                ("--topic", topic_name, "--to-datetime", "2024"), ("--topic", topic_name, "--to-datetime", "latest")):
        refused = cli("groups", "reset-offsets", "resetting", *bad, "--execute", check=False)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, (bad, refused.stderr)
    trailing = cli("groups", "reset-offsets", "resetting", "--topic", f"{topic_name}:0,", "--to-offset", "3").stdout
    assert {int(r[2]): int(r[3]) for r in _rows(trailing)} == {0: 3}            # a trailing comma is ignored
    # Nothing changed yet: those were dry runs.
    assert [r[3] for r in _rows(cli("groups", "describe", "resetting").stdout)] == ["6", "6"]
    cli("groups", "reset-offsets", "resetting", "--topic", f"{topic_name}:1", "--to-earliest", "--execute")
    assert [r[3] for r in _rows(cli("groups", "describe", "resetting").stdout)] == ["6", "0"]
    _commit(shared_broker.bootstrap, "resetting", topic_name, {0: 100, 1: 0})
    assert [r[5] for r in _rows(cli("groups", "describe", "resetting").stdout)] == ["-93", "7"]   # Kafka's lag


def test_delete_offsets_and_delete_group(cli, shared_broker, topic_name):
    create_topic(shared_broker.bootstrap, topic_name, partitions=2)
    _commit(shared_broker.bootstrap, "deleting", topic_name, {0: 0, 1: 0})
    cli("groups", "delete-offsets", "deleting", "--topic", f"{topic_name}:0")
    assert [r[2] for r in _rows(cli("groups", "describe", "deleting").stdout)] == ["1"]
    cli("groups", "delete", "deleting")
    assert "deleting" not in lines(cli("groups", "list").stdout)
    missing = cli("groups", "describe", "deleting", check=False)   # kafka-consumer-groups.sh exits 0 here too
    assert missing.returncode == 0 and "Consumer group 'deleting' does not exist." in missing.stderr, missing.stderr
    # several groups: each outcome is reported (the second was deleted unreported after the first failed)
    _commit(shared_broker.bootstrap, "deleting-2", topic_name, {0: 0})
    both = cli("groups", "delete", "deleting", "deleting-2", check=False)
    assert both.returncode == 1 and "Deleted group deleting-2." in both.stdout, (both.stdout, both.stderr)
    assert "group deleting was not deleted" in both.stderr


def _committed(bootstrap, *groups) -> dict[str, dict[int, int]]:
    """Each group's committed offsets by partition, read back with the AdminClient."""
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        futures = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g) for g in groups])
        return {g: {tp.partition: tp.offset for tp in futures[g].result(30).topic_partitions} for g in groups}


def test_describe_all_groups_state_and_offsets_views(cli, shared_broker, topic_name):
    """checkArgs: describe takes groups or --all-groups (not both, not neither) and at most one of
    --members, --offsets, --state; --offsets is the default view by name."""
    create_topic(shared_broker.bootstrap, topic_name, partitions=2)
    _produce(shared_broker.bootstrap, topic_name, 10)
    for group in ("viewed-a", "viewed-b"):
        _commit(shared_broker.bootstrap, group, topic_name, {0: 1, 1: 2})
    every = _rows(cli("groups", "describe", "--all-groups").stdout)
    assert [topic_name, "0", "1", "5", "4"] in [r[1:6] for r in every if r[0] == "viewed-a"], every
    assert {r[0] for r in every} >= {"viewed-a", "viewed-b"}, every
    assert cli("groups", "describe", "viewed-a", "--offsets").stdout == cli("groups", "describe", "viewed-a").stdout
    described = cli("groups", "describe", "--all-groups", "--state")
    states = lines(described.stdout)          # per group, as Kafka's printStates: "", header, row
    assert states[1].split()[:3] == ["GROUP", "COORDINATOR", "(ID)"], states
    assert {r.split()[0]: r.split()[-2:] for r in states[2::3]}.get("viewed-b") == ["Empty", "0"], states
    assert "Consumer group 'viewed-b' has no active members." in described.stderr, described.stderr
    missing = cli("groups", "describe", "viewed-missing", "--state", check=False)
    assert missing.returncode == 0 and "Consumer group 'viewed-missing' does not exist." in missing.stderr
    for bad, why in (((), "takes one of these options: --all-groups"),
                     (("viewed-a", "--all-groups"), "can't be used with option \"--all-groups\""),
                     (("viewed-a", "--members", "--state"), "at most one of these options"),
                     (("viewed-a", "--offsets", "--members"), "at most one of these options")):
        res = cli("groups", "describe", *bad, check=False)
        assert res.returncode == 2 and why in res.stderr and "Traceback" not in res.stderr, (bad, res.stderr)


def test_all_groups_reset_and_delete_skip_a_running_group(broker_factory, topic_name):
    """resetOffsets/deleteGroups with --all-groups: every group is tried; the one with members is
    refused by name (exit 1) and the others are reset, then deleted. A fresh broker, so that
    --all-groups sees only this test's groups."""
    bootstrap = broker_factory().bootstrap
    create_topic(bootstrap, topic_name, partitions=2)
    _produce(bootstrap, topic_name, 10)
    for group in ("idle-a", "idle-b"):
        _commit(bootstrap, group, topic_name, {0: 3, 1: 4})
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "busy"})
    c.subscribe([topic_name])
    try:
        wait_until(lambda: c.poll(0.05) is None and len(c.assignment()) == 2, 30, 0.01, "an assignment")
        c.commit(offsets=[TopicPartition(topic_name, 0, 1)], asynchronous=False)
        reset = run_cli(bootstrap, "groups", "reset-offsets", "--all-groups", "--all-topics", "--to-earliest",
                        "--execute", check=False)
        assert reset.returncode == 1 and "NON_EMPTY_GROUP" in reset.stderr and "'busy'" in reset.stderr, reset.stderr
        assert sorted(r[0] for r in _rows(reset.stdout)) == ["idle-a", "idle-a", "idle-b", "idle-b"], reset.stdout
        assert _committed(bootstrap, "idle-a", "idle-b", "busy") == {
            "idle-a": {0: 0, 1: 0}, "idle-b": {0: 0, 1: 0}, "busy": {0: 1}}
        for bad in (("groups", "delete"), ("groups", "delete", "idle-a", "--all-groups"),
                    ("groups", "reset-offsets", "--all-topics", "--to-earliest"),
                    ("groups", "reset-offsets", "idle-a", "--all-groups", "--all-topics", "--to-earliest")):
            res = run_cli(bootstrap, *bad, check=False)
            assert res.returncode == 2 and "Traceback" not in res.stderr, (bad, res.stderr)
        deleted = run_cli(bootstrap, "groups", "delete", "--all-groups", check=False)
        assert deleted.returncode == 1 and "group busy was not deleted" in deleted.stderr, deleted.stderr
        assert "Deleted group idle-a." in deleted.stdout and "Deleted group idle-b." in deleted.stdout
        assert lines(run_cli(bootstrap, "groups", "list").stdout) == ["busy"]
    finally:
        c.close()


def test_reset_offsets_export_then_from_file_round_trip(cli, shared_broker, topic_name, tmp_path):
    """exportOffsetsToCsv / parseResetPlan: the dry run's CSV (group,topic,partition,offset; no group
    column for a single group) applied with --from-file moves the committed offsets to it."""
    create_topic(shared_broker.bootstrap, topic_name, partitions=2)
    _produce(shared_broker.bootstrap, topic_name, 10)                  # log end 5 on each partition
    g1, g2 = f"{topic_name}-g1", f"{topic_name}-g2"
    _commit(shared_broker.bootstrap, g1, topic_name, {0: 1, 1: 1})
    _commit(shared_broker.bootstrap, g2, topic_name, {0: 2, 1: 2})
    plan = tmp_path / "plan.csv"
    export = cli("groups", "reset-offsets", g1, g2, "--all-topics", "--shift-by", "2", "--dry-run", "--export")
    assert lines(export.stdout) == [f"{g1},{topic_name},0,3", f"{g1},{topic_name},1,3",
                                    f"{g2},{topic_name},0,4", f"{g2},{topic_name},1,4"], export.stdout
    plan.write_text(export.stdout)
    assert _committed(shared_broker.bootstrap, g1, g2) == {g1: {0: 1, 1: 1}, g2: {0: 2, 1: 2}}   # a dry run
    cli("groups", "reset-offsets", g1, g2, "--from-file", plan, "--execute")
    assert _committed(shared_broker.bootstrap, g1, g2) == {g1: {0: 3, 1: 3}, g2: {0: 4, 1: 4}}
    # One group: "topic,partition,offset" lines; it also reads its own rows of a several-group file.
    single = cli("groups", "reset-offsets", g1, "--topic", f"{topic_name}:1", "--to-earliest", "--export").stdout
    assert lines(single) == [f"{topic_name},1,0"], single
    (tmp_path / "one.csv").write_text(single)
    cli("groups", "reset-offsets", g1, "--from-file", tmp_path / "one.csv", "--execute")
    plan.write_text(f"{g2},{topic_name},0,100\n{g2},{topic_name},1,-5\n{g1},{topic_name},0,0\n")
    applied = cli("groups", "reset-offsets", g2, "--from-file", plan, "--execute").stdout
    assert {(r[0], r[2], r[3]) for r in _rows(applied)} == {(g2, "0", "5"), (g2, "1", "0")}   # checkOffsetsRange
    assert _committed(shared_broker.bootstrap, g1, g2) == {g1: {0: 3, 1: 0}, g2: {0: 5, 1: 0}}
    absent = cli("groups", "reset-offsets", f"{topic_name}-g3", "--from-file", plan, "--execute")
    assert f"No reset plan for group {topic_name}-g3 found" in absent.stderr, absent.stderr
    (tmp_path / "bad.csv").write_text(f"{topic_name},0,x\n")
    for bad in (("--from-file", plan, "--to-earliest"), ("--from-file", tmp_path / "bad.csv"),
                ("--from-file", tmp_path / "missing.csv"), ("--to-earliest",)):
        res = cli("groups", "reset-offsets", g1, *bad, "--execute", check=False)
        assert res.returncode == 2 and "Traceback" not in res.stderr, (bad, res.stderr)
    assert _committed(shared_broker.bootstrap, g1, g2) == {g1: {0: 3, 1: 0}, g2: {0: 5, 1: 0}}
