"""``riverlog`` commands held to the rules of Kafka's own tools (ConfigCommand, DeleteRecordsCommand,
ConsumerGroupCommand, ConsoleConsumer, ConsoleProducer, GetOffsetShell, TopicCommand)."""
from __future__ import annotations

import pytest

from broker.client import AdminClient, ConfigResource, Consumer, Producer, TopicPartition
from tests.conftest import wait_until
from tests.integration.test_cli import cli, create_topic, lines, run_cli  # noqa: F401 - cli is a fixture

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def overrides(bootstrap: str, topic: str) -> dict[str, str]:
    """The topic's config overrides (DYNAMIC_TOPIC_CONFIG), read with the admin client."""
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        entries = next(iter(admin.describe_configs([ConfigResource("topic", topic)]).values())).result(30)
    return {k: e.value for k, e in entries.items() if e.source == "DYNAMIC_TOPIC_CONFIG"}


# ----------------------------------------------------------------------------------- topics alter
def test_alter_add_config_splits_at_commas_outside_brackets(cli, shared_broker, topic_name):
    """ConfigCommand.parseConfigsToBeAdded: ``k1=v1,k2=[a,b]`` is two configs, the brackets dropped."""
    create_topic(shared_broker.bootstrap, topic_name)
    cli("topics", "alter", topic_name, "--add-config", "retention.ms=1000,cleanup.policy=[compact,delete]")
    assert overrides(shared_broker.bootstrap, topic_name) == {"retention.ms": "1000",
                                                              "cleanup.policy": "compact,delete"}
    bad = cli("topics", "alter", topic_name, "--add-config", "retention.ms", check=False)
    assert bad.returncode == 2 and "key=val" in bad.stderr, bad.stderr


def test_alter_delete_config_takes_a_comma_list_and_refuses_keys_not_set(cli, shared_broker, topic_name):
    """ConfigCommand: ``--delete-config a,b`` deletes both; a key that is not an override fails the
    command with "Invalid config(s): ..." and changes nothing."""
    create_topic(shared_broker.bootstrap, topic_name, **{"retention.ms": "1000", "cleanup.policy": "compact",
                                                         "segment.ms": "60000"})
    cli("topics", "alter", topic_name, "--delete-config", "retention.ms,cleanup.policy")
    assert overrides(shared_broker.bootstrap, topic_name) == {"segment.ms": "60000"}
    refused = cli("topics", "alter", topic_name, "--delete-config", "segment.ms, retention.mss", check=False)
    assert refused.returncode == 1, refused.stdout
    assert "INVALID_CONFIG: Invalid config(s): retention.mss" in refused.stderr, refused.stderr
    assert "Altered" not in refused.stdout
    assert overrides(shared_broker.bootstrap, topic_name) == {"segment.ms": "60000"}, "nothing was deleted"


# ----------------------------------------------------------------------------------- delete-records
def test_delete_records_reports_every_partition_then_fails(cli, shared_broker, topic_name):
    """DeleteRecordsCommand.execute prints each partition's low watermark or error; one partition
    past its high watermark does not hide that the others were truncated."""
    create_topic(shared_broker.bootstrap, topic_name, partitions=2)
    with Producer({"bootstrap.servers": shared_broker.bootstrap}) as p:
        for i in range(13):
            p.produce(topic_name, value=b"v", partition=0 if i < 3 else 1)
        assert p.flush(10) == 0
    res = cli("delete-records", topic_name, "--offset", "5", check=False)
    assert res.returncode == 1, (res.stdout, res.stderr)
    assert lines(res.stdout) == [f"{topic_name}:1:5"], res.stdout
    assert f"{topic_name}:0: OFFSET_OUT_OF_RANGE" in res.stderr, res.stderr
    earliest = cli("offsets", topic_name, "--time", "earliest").stdout
    assert lines(earliest) == [f"{topic_name}:0:0", f"{topic_name}:1:5"]


# ----------------------------------------------------------------------------------- groups delete-offsets
def _table(text: str, header: str) -> list[list[str]]:
    """The rows under the line starting with ``header``, split on whitespace."""
    out = [line.split() for line in lines(text)]
    start = next(i for i, r in enumerate(out) if r and r[0] == header)
    return [r for r in out[start + 1:] if r]


def test_delete_offsets_fails_only_the_subscribed_topic(cli, shared_broker, topic_name):
    """OffsetMetadataManager.deleteOffsets: the subscribed topic's partitions fail with
    GROUP_SUBSCRIBED_TO_TOPIC, the other topic's offsets are deleted; ConsumerGroupCommand lists both."""
    subscribed, other, group = f"{topic_name}-s", f"{topic_name}-o", f"{topic_name}-g"
    create_topic(shared_broker.bootstrap, subscribed)
    create_topic(shared_broker.bootstrap, other)
    c = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(subscribed, 0, 0), TopicPartition(other, 0, 0)], asynchronous=False)
        c.subscribe([subscribed])
        wait_until(lambda: c.poll(0.05) is None and len(c.assignment()) == 1, 30, 0.01, "an assignment")
        res = cli("groups", "delete-offsets", group, "--topic", subscribed, "--topic", other, check=False)
        assert res.returncode == 1, (res.stdout, res.stderr)
        rows = _table(res.stdout, "TOPIC")
        assert [r[:3] for r in rows] == [[other, "0", "Successful"], [subscribed, "0", "Error:"]], res.stdout
        assert rows[1][3] == "GROUP_SUBSCRIBED_TO_TOPIC:", res.stdout
        committed = c.committed([TopicPartition(subscribed, 0), TopicPartition(other, 0)], timeout=10)
        assert [tp.offset for tp in committed] == [0, -1001], "only the unsubscribed topic's offset is gone"
    finally:
        c.close()


# ----------------------------------------------------------------------------------- groups reset-offsets
def _fill(bootstrap: str, topic: str, per_partition: int, partitions: int = 2) -> None:
    with Producer({"bootstrap.servers": bootstrap}) as p:
        for i in range(per_partition * partitions):
            p.produce(topic, value=b"v", partition=i % partitions)
        assert p.flush(10) == 0


def _commit(bootstrap: str, group: str, offsets: list[TopicPartition]) -> None:
    from broker.client import ConsumerGroupTopicPartitions
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, offsets)])[group].result(30)


def _plan(res) -> dict[int, int]:
    return {int(r[2]): int(r[3]) for r in _table(res.stdout, "GROUP") if not r[0].startswith("(")}


def test_reset_offsets_refuses_two_scenarios_and_dry_run_with_execute(cli, shared_broker, topic_name):
    """ConsumerGroupCommandOptions.checkArgs: one scenario only (the last one used to win silently),
    and --dry-run and --execute exclude each other; --dry-run is accepted and changes nothing."""
    group = f"{topic_name}-g"
    create_topic(shared_broker.bootstrap, topic_name, partitions=2)
    _fill(shared_broker.bootstrap, topic_name, 10)
    _commit(shared_broker.bootstrap, group, [TopicPartition(topic_name, 0, 4), TopicPartition(topic_name, 1, 4)])
    for extra in (("--to-earliest", "--to-latest"), ("--to-latest", "--to-current"),
                  ("--to-offset", "1", "--to-offset", "7"), ("--to-earliest", "--shift-by", "1"),
                  ("--to-earliest", "--dry-run", "--execute")):
        res = cli("groups", "reset-offsets", group, "--topic", topic_name, *extra, "--execute", check=False)
        assert res.returncode == 2 and "Traceback" not in res.stderr, (extra, res.stdout, res.stderr)
    assert "can't be used with option" in cli("groups", "reset-offsets", group, "--topic", topic_name,
                                              "--to-earliest", "--to-latest", check=False).stderr
    assert _plan(cli("groups", "reset-offsets", group, "--topic", topic_name, "--to-latest", "--dry-run")) \
        == {0: 10, 1: 10}
    c = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": group})
    try:
        assert [tp.offset for tp in c.committed([TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)],
                                                timeout=10)] == [4, 4], "nothing was applied"
    finally:
        c.close()


def test_reset_to_current_keeps_committed_offsets_out_of_range(cli, shared_broker, topic_name):
    """ConsumerGroupCommand.prepareOffsetsToReset: --to-current keeps each committed offset as it is;
    only --to-offset and --shift-by go through checkOffsetsRange."""
    group = f"{topic_name}-g"
    create_topic(shared_broker.bootstrap, topic_name, partitions=2)
    _fill(shared_broker.bootstrap, topic_name, 10)
    _commit(shared_broker.bootstrap, group, [TopicPartition(topic_name, 0, 2), TopicPartition(topic_name, 1, 100)])
    cli("delete-records", topic_name, "--partition", "0", "--offset", "5")
    assert _plan(cli("groups", "reset-offsets", group, "--all-topics", "--to-current", "--execute")) \
        == {0: 2, 1: 100}
    assert _plan(cli("groups", "reset-offsets", group, "--all-topics", "--shift-by", "1")) == {0: 5, 1: 10}


def test_reset_by_signed_duration_old_datetime_and_topic_lists(cli, shared_broker, topic_name):
    """Java's Duration.parse signs (-PT1H, PT-1H: a time in the future, so the log end) and its
    refusal of 'P1DT'; a date-time before 1970 is before every record (the log start);
    parseTopicsWithPartitions refuses an empty partition in 't:0,,1'."""
    group = f"{topic_name}-g"
    create_topic(shared_broker.bootstrap, topic_name, partitions=2)
    _fill(shared_broker.bootstrap, topic_name, 10)
    _commit(shared_broker.bootstrap, group, [TopicPartition(topic_name, 0, 6), TopicPartition(topic_name, 1, 6)])
    cli("delete-records", topic_name, "--partition", "0", "--offset", "3")
    for future in ("-PT1H", "PT-1H", "-pt30m"):
        assert _plan(cli("groups", "reset-offsets", group, "--topic", topic_name, "--by-duration", future)) \
            == {0: 10, 1: 10}, future
    assert _plan(cli("groups", "reset-offsets", group, "--topic", topic_name, "--by-duration", "P1D")) \
        == {0: 3, 1: 0}
    assert _plan(cli("groups", "reset-offsets", group, "--topic", topic_name, "--to-datetime",
                     "1960-01-01T00:00:00")) == {0: 3, 1: 0}
    for bad in (("--topic", topic_name, "--by-duration", "P1DT"), ("--topic", topic_name, "--by-duration", "P"),
                ("--topic", f"{topic_name}:0,,1", "--to-earliest"), ("--topic", f"{topic_name}:,0", "--to-earliest")):
        res = cli("groups", "reset-offsets", group, *bad, check=False)
        assert res.returncode == 2 and "Traceback" not in res.stderr, (bad, res.stderr)


# ----------------------------------------------------------------------------------- groups describe
def test_describe_reports_every_group_past_a_missing_one(cli, shared_broker, topic_name):
    """ConsumerGroupService.describeGroups: a missing group gets its "does not exist" line and the
    next group is still described; printError does not exit, so the status stays 0."""
    group = f"{topic_name}-g"
    create_topic(shared_broker.bootstrap, topic_name)
    _commit(shared_broker.bootstrap, group, [TopicPartition(topic_name, 0, 0)])
    res = cli("groups", "describe", f"{topic_name}-missing", group, check=False)
    assert res.returncode == 0, (res.stdout, res.stderr)
    assert f"Consumer group '{topic_name}-missing' does not exist." in res.stderr, res.stderr
    assert [r[:3] for r in _table(res.stdout, "GROUP")] == [[group, topic_name, "0"]], res.stdout


# ----------------------------------------------------------------------------------- consume
def test_consume_reads_uncommitted_unless_told(cli, shared_broker, topic_name):
    """ConsoleConsumerOptions: --isolation-level defaults to read_uncommitted; read_committed (by
    the option or --consumer-property) hides an aborted transaction's record."""
    create_topic(shared_broker.bootstrap, topic_name)
    with Producer({"bootstrap.servers": shared_broker.bootstrap, "transactional.id": f"{topic_name}-tx"}) as p:
        p.init_transactions()
        p.begin_transaction()
        p.produce(topic_name, value=b"aborted", partition=0)
        p.flush(10)
        p.abort_transaction()
    with Producer({"bootstrap.servers": shared_broker.bootstrap}) as p:
        p.produce(topic_name, value=b"plain", partition=0)
        assert p.flush(10) == 0

    def read(*extra):
        return lines(cli("consume", topic_name, "--from-beginning", "--timeout-ms", 2000, *extra).stdout)
    assert read() == ["aborted", "plain"]
    assert read("--isolation-level", "read_committed") == ["plain"]
    assert read("--consumer-property", "isolation.level=read_committed") == ["plain"]
    assert read("--consumer-property", "isolation.level=read_committed",
                "--isolation-level", "read_uncommitted") == ["aborted", "plain"]
    clash = cli("consume", topic_name, "--from-beginning", "--consumer-property", "auto.offset.reset=latest",
                check=False)
    assert clash.returncode == 2 and "Can't simultaneously specify --from-beginning" in clash.stderr, clash.stderr


# ----------------------------------------------------------------------------------- offsets
def test_offsets_leaves_out_partitions_without_an_offset(cli, shared_broker, topic_name):
    """GetOffsetShell.fetchOffsets omits a partition whose answer is no offset (-1);
    parseOffsetSpec takes -4/earliest-local and -5/latest-tiered (no offset without remote storage)."""
    create_topic(shared_broker.bootstrap, topic_name, partitions=2)
    with Producer({"bootstrap.servers": shared_broker.bootstrap}) as p:
        for ts in (1000, 3000, 2000, 5000):
            p.produce(topic_name, value=b"v", partition=0, timestamp=ts)
        assert p.flush(10) == 0

    def at(when):
        return lines(cli("offsets", topic_name, "--time", when).stdout)
    assert at("2500") == [f"{topic_name}:0:1"]
    assert at("6000") == []
    assert at("-4") == at("earliest-local") == [f"{topic_name}:0:0", f"{topic_name}:1:0"]
    assert at("-5") == at("latest-tiered") == []
    assert at("latest") == [f"{topic_name}:0:4", f"{topic_name}:1:0"]


def test_offsets_take_get_offset_shells_topic_filters(cli, shared_broker, topic_name):
    """GetOffsetShell: --topic is a regex with --partitions ids, --topic-partitions takes rules, and
    filters that match nothing fail (exit 1)."""
    create_topic(shared_broker.bootstrap, f"{topic_name}-a", partitions=3)
    create_topic(shared_broker.bootstrap, f"{topic_name}-b", partitions=1)
    assert lines(cli("offsets", "--topic", f"{topic_name}-.*", "--partitions", "0,2", "--time", "earliest").stdout) == [
        f"{topic_name}-a:0:0", f"{topic_name}-a:2:0", f"{topic_name}-b:0:0"]
    assert lines(cli("offsets", "--topic-partitions", f"{topic_name}-a:1-,{topic_name}-b").stdout) == [
        f"{topic_name}-a:1:0", f"{topic_name}-a:2:0", f"{topic_name}-b:0:0"]
    none = cli("offsets", "--topic", f"{topic_name}-x.*", check=False)
    assert none.returncode == 1 and "Could not match any topic-partitions with the specified filters" in none.stderr


# ----------------------------------------------------------------------------------- produce
def test_produce_keeps_repeated_headers_and_splits_lines_as_read_line(cli, shared_broker, topic_name):
    """Record headers are a list (a key may repeat), so every --header is kept in order; lines end
    at \\n, \\r or \\r\\n as Java's BufferedReader.readLine splits them for the console producer."""
    create_topic(shared_broker.bootstrap, topic_name)
    cli("produce", topic_name, "-H", "trace=a", "-H", "trace=b", "-H", "x=1", input=b"x\r\r\ny\rz\n")
    c = Consumer({"bootstrap.servers": shared_broker.bootstrap})
    from broker.client import OFFSET_BEGINNING
    c.assign([TopicPartition(topic_name, 0, OFFSET_BEGINNING)])
    try:
        got = []
        wait_until(lambda: got.extend(m for m in c.consume(10, 0.5) if m.error() is None) or len(got) >= 4,
                   30, 0, "the records")
    finally:
        c.close()
    assert [m.value() for m in got] == [b"x", b"", b"y", b"z"]
    assert got[0].headers() == [("trace", b"a"), ("trace", b"b"), ("x", b"1")]


# ----------------------------------------------------------------------------------- topics
def test_topics_hide_only_internal_topics_and_if_exists_flags(cli, shared_broker, topic_name):
    """Topic.isInternal: only __consumer_offsets / __transaction_state are hidden, not a user topic
    named __x; --if-not-exists on an existing topic prints nothing; --if-exists deletes quietly."""
    user = f"__{topic_name}"
    create_topic(shared_broker.bootstrap, user)
    c = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": f"{topic_name}-g"})
    c.commit(offsets=[TopicPartition(user, 0, 0)], asynchronous=False)        # __consumer_offsets exists
    c.close()
    listed = lines(cli("topics", "list").stdout)
    assert user in listed and "__consumer_offsets" not in listed, listed
    assert "__consumer_offsets" in lines(cli("topics", "list", "--all").stdout)
    described = cli("topics", "describe").stdout
    assert f"Topic: {user}\t" in described and "__consumer_offsets" not in described
    again = cli("topics", "create", user, "--if-not-exists")
    assert again.stdout == "" and again.returncode == 0, again.stdout
    gone = cli("topics", "delete", f"{topic_name}-never", "--if-exists")
    assert gone.stdout == "" and gone.returncode == 0
    assert cli("topics", "delete", f"{topic_name}-never", check=False).returncode == 1
    # TopicCommand: --if-exists on --alter and --describe makes a missing topic no error, and no output
    for quiet in (("alter", f"{topic_name}-never", "--add-config", "retention.ms=1", "--if-exists"),
                  ("describe", f"{topic_name}-never", "--if-exists")):
        res = cli("topics", *quiet, check=False)
        assert (res.returncode, res.stdout, res.stderr) == (0, "", ""), (quiet, res.stdout, res.stderr)
    assert cli("topics", "delete", user, "--if-exists").stdout.strip() == f"Deleted topic {user}."


def test_describe_report_options(cli, shared_broker, topic_name):
    """TopicCommand's --under-min-isr-partitions reads the topic's min.insync.replicas;
    --unavailable-partitions checks the leader against the live brokers; --topic is a regex
    (IncludeList) and one matching nothing fails."""
    create_topic(shared_broker.bootstrap, topic_name, partitions=2, **{"min.insync.replicas": "2"})
    under = lines(cli("topics", "describe", topic_name, "--under-min-isr-partitions").stdout)
    assert [line.split("\t")[2] for line in under] == ["Partition: 0", "Partition: 1"], under
    assert cli("topics", "describe", topic_name, "--unavailable-partitions", "--at-min-isr-partitions").stdout == ""
    overridden = lines(cli("topics", "describe", "--topic", f"{topic_name}|{topic_name}-x.*",
                           "--topics-with-overrides").stdout)
    assert len(overridden) == 1 and overridden[0].startswith(f"Topic: {topic_name}\t"), overridden
    assert overridden[0].endswith("Configs: min.insync.replicas=2"), overridden
    missing = cli("topics", "describe", "--topic", f"{topic_name}-x.*", check=False)
    assert missing.returncode == 1 and f"Topic '{topic_name}-x.*' does not exist as expected" in missing.stderr
