"""``riverlog topics``: create, list, describe, alter, delete topics and elect preferred leaders.

    riverlog topics create orders --partitions 3 --config retention.ms=86400000
    riverlog topics describe orders
    riverlog topics alter orders --add-config retention.ms=3600000 --partitions 6
"""
from __future__ import annotations

import re
from dataclasses import replace

import click

from broker.cli.common import ReportErrors, alter_incrementally, internal_topics, open_admin, pairs
from broker.cli.params import PARTITION, PARTITION_COUNT, POSITIVE, REPLICA_ASSIGNMENT, REPLICATION_FACTOR
from broker.cli.topic_description import PartitionInfo, Reports, TopicInfo, describe_lines
from broker.cli.topic_partition_filter import TopicPartitionFilterError, include_list


@click.group(cls=ReportErrors)
def topics():
    """Create, list, describe, alter and delete topics."""


@topics.command("create")
@click.argument("name")
@click.option("--partitions", "-p", type=PARTITION_COUNT, default=-1, help="default: the broker's num.partitions")
@click.option("--replication-factor", "-r", type=REPLICATION_FACTOR, default=-1)
@click.option("--replica-assignment", type=REPLICA_ASSIGNMENT, default=None,
              help="brokers of each partition, e.g. 1:2,2:3 (instead of --partitions and --replication-factor)")
@click.option("--config", "-c", "configs", multiple=True, help="key=value topic config (repeatable)")
@click.option("--if-not-exists", is_flag=True, help="succeed quietly when the topic exists")
@click.pass_context
def topics_create(ctx, name, partitions, replication_factor, replica_assignment, configs, if_not_exists):
    from broker.client import NewTopic
    from broker.errors import TopicAlreadyExistsError
    if replica_assignment and (partitions != -1 or replication_factor != -1):
        raise click.UsageError("--replica-assignment cannot be used with --partitions or --replication-factor")
    new = NewTopic(name, len(replica_assignment), -1, replica_assignment, pairs(configs, "--config")) \
        if replica_assignment else NewTopic(name, partitions, replication_factor, pairs(configs, "--config"))
    with open_admin(ctx) as admin:
        future = admin.create_topics([new])[name]
        try:
            future.result()
        except TopicAlreadyExistsError:
            if not if_not_exists:
                raise
            return          # TopicCommand.createTopic: nothing to say when the topic already exists
    click.echo(f"Created topic {name}.")


@topics.command("list")
@click.option("--all", "show_internal", is_flag=True, help="include internal topics")
@click.option("--exclude-internal", is_flag=True, help="leave out internal topics (the default without --all)")
@click.option("--topic", "topic_regex", default=None, help="only topics whose whole name matches this regex")
@click.pass_context
def topics_list(ctx, show_internal, exclude_internal, topic_regex):
    if show_internal and exclude_internal:
        raise click.UsageError("--all and --exclude-internal cannot be given together")
    with open_admin(ctx) as admin:
        names = _matching(admin.list_topics().topics, topic_regex)
        hidden = set() if show_internal else internal_topics(admin, names)
    for name in names:
        if name not in hidden:
            click.echo(name)


@topics.command("describe")
@click.argument("names", nargs=-1)
@click.option("--under-replicated-partitions", is_flag=True, help="only partitions with fewer in sync than replicas")
@click.option("--unavailable-partitions", is_flag=True, help="only partitions without a live leader")
@click.option("--under-min-isr-partitions", is_flag=True,
              help="only partitions without a leader or with fewer in sync than min.insync.replicas")
@click.option("--at-min-isr-partitions", is_flag=True, help="only partitions with exactly min.insync.replicas in sync")
@click.option("--topics-with-overrides", is_flag=True, help="only the topic lines of topics with config overrides")
@click.option("--exclude-internal", is_flag=True, help="leave out internal topics (they are left out unless named)")
@click.option("--topic", "topic_regex", default=None,
              help="instead of NAMES: the topics whose whole name matches this regex (internal ones too)")
@click.option("--if-exists", is_flag=True, help="no error for a topic that does not exist (or --topic matching none)")
@click.pass_context
def topics_describe(ctx, names, under_replicated_partitions, unavailable_partitions, under_min_isr_partitions,
                    at_min_isr_partitions, topics_with_overrides, exclude_internal, topic_regex, if_exists):
    """Topic and partition lines as kafka-topics --describe, with its report options."""
    from broker.client import ConfigResource
    from broker.errors import UnknownTopicOrPartitionError
    reports = Reports(under_replicated_partitions, unavailable_partitions, under_min_isr_partitions,
                      at_min_isr_partitions, topics_with_overrides)
    if topics_with_overrides and reports.partition_reports:
        raise click.UsageError("--topics-with-overrides cannot be used with the partition report options")
    if names and topic_regex is not None:
        raise click.UsageError("give the topics as NAMES or as --topic, not both")
    with open_admin(ctx) as admin:
        md = admin.list_topics()
        if topic_regex is not None:
            names = tuple(_matching(md.topics, topic_regex))
            if not names:
                if if_exists:
                    return
                raise UnknownTopicOrPartitionError(f"Topic '{topic_regex}' does not exist as expected")
        wanted = names or sorted(set(md.topics) - internal_topics(admin, md.topics))
        if names and exclude_internal:
            hidden = internal_topics(admin, [n for n in names if n in md.topics])
            wanted = [n for n in names if n not in hidden]
        if unavailable_partitions:
            reports = replace(reports, live_brokers=frozenset(n.id for n in admin.describe_cluster().result().nodes))
        for name in wanted:
            topic = md.topics.get(name)
            if topic is None or topic.error is not None:
                if if_exists:       # TopicCommand.describeTopic: only the topics that exist are described
                    continue
                raise UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
            entries = admin.describe_configs([ConfigResource("topic", name)])
            configs = next(iter(entries.values())).result()
            min_isr = configs.get("min.insync.replicas")
            info = TopicInfo(name, str(topic.topic_id),
                             [PartitionInfo(p.partition, p.leader, list(p.replicas), list(p.isr))
                              for p in topic.partitions.values()],
                             {k: e.value for k, e in configs.items() if e.source == "DYNAMIC_TOPIC_CONFIG"},
                             int(min_isr.value) if min_isr is not None and min_isr.value else 1)
            for line in describe_lines(info, reports):
                click.echo(line)


def _matching(topics, regex: str | None) -> list[str]:
    """The topic names, sorted, that Kafka's ``--topic`` include list matches (all without one)."""
    if regex is None:
        return sorted(topics)
    try:
        pattern = include_list(regex)
    except TopicPartitionFilterError as e:
        raise click.BadParameter(str(e), param_hint="'--topic'") from None
    return [name for name in sorted(topics) if pattern.fullmatch(name)]


@topics.command("delete")
@click.argument("name")
@click.option("--if-exists", is_flag=True, help="succeed quietly when the topic does not exist")
@click.pass_context
def topics_delete(ctx, name, if_exists):
    """Delete a topic; with ``--if-exists`` a missing one is no error and prints nothing (Kafka's
    ``TopicCommand.deleteTopic`` with ``--if-exists``)."""
    from broker.errors import UnknownTopicOrPartitionError
    with open_admin(ctx) as admin:
        try:
            admin.delete_topics([name])[name].result()
        except UnknownTopicOrPartitionError:
            if not if_exists:
                raise
            return
    click.echo(f"Deleted topic {name}.")


@topics.command("elect-leaders")
@click.argument("name")
@click.option("--partition", "-p", "partitions", type=PARTITION, multiple=True, help="default: every partition")
@click.option("--election-type", type=click.Choice(["preferred", "unclean"], case_sensitive=False), default="preferred",
              help="preferred: back to the first in-sync replica; unclean: any live replica for a leaderless "
                   "partition (records only the lost ISR held are lost)")
@click.pass_context
def topics_elect_leaders(ctx, name, partitions, election_type):
    """Move leadership back to the preferred replicas, or lead leaderless partitions (kafka-leader-election).

    Prints ``LeaderElectionCommand``'s lines: the partitions elected, those that needed no election
    ("Valid replica already elected", not a failure), then one error line per partition that
    failed; the exit status is 1 when any failed."""
    from broker.client import ElectionType, KafkaError, TopicPartition
    kind = ElectionType.UNCLEAN if election_type.lower() == "unclean" else ElectionType.PREFERRED
    label = kind.name
    with open_admin(ctx) as admin:
        every = [TopicPartition(name, p) for p in partitions] or \
            [TopicPartition(name, p) for p in sorted(admin.list_topics(name, timeout=30).topics[name].partitions)]
        results = admin.elect_leaders(kind, every).result()
    noop = sorted(tp.partition for tp, e in results.items()
                  if e is not None and e.args[0].code() == KafkaError.ELECTION_NOT_NEEDED)
    failed = {tp: e for tp, e in results.items() if e is not None and tp.partition not in noop}
    elected = sorted(tp.partition for tp, e in results.items() if e is None)
    if elected:
        click.echo(f"Successfully completed leader election ({label}) for partitions "
                   f"{', '.join(f'{name}-{p}' for p in elected)}")
    if noop:
        click.echo(f"Valid replica already elected for partitions {', '.join(f'{name}-{p}' for p in noop)}")
    for tp, e in sorted(failed.items(), key=lambda kv: kv[0].partition):
        where = f"{name}-{tp.partition}"
        text = e.args[0].str()
        text = text[len(where) + 2:] if text.startswith(where + ": ") else text   # named once
        click.echo(f"Error completing leader election ({label}) for partition: {where}: {text}", err=True)
    if failed:
        ctx.exit(1)


_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"


def parse_configs_to_add(values) -> dict[str, str]:
    """``--add-config k1=v1,k2=[a,b]`` (repeatable) as Kafka's ``ConfigCommand.parseConfigsToBeAdded``:
    split at commas outside ``[...]``, each part at its ``=``, then drop the brackets, so a list
    value (``cleanup.policy=[compact,delete]``) stays one value."""
    out = {}
    for value in values:
        items = re.split("," + _OUTSIDE_BRACKETS, value)
        while len(items) > 1 and items[-1] == "":    # Java's String.split drops trailing empty strings
            items.pop()
        for item in items:
            pair = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, item)
            if len(pair) != 2:
                raise click.BadParameter('Invalid entity config: all configs to be added must be in the format '
                                         f'"key=val" (got {item!r}).', param_hint="--add-config")
            out[pair[0].strip()] = re.sub(r"\[?\]?", "", pair[1]).strip()
    return out


def parse_configs_to_delete(values) -> list[str]:
    """``--delete-config k1,k2`` (repeatable): Kafka's ``deleteConfig`` option is
    ``withValuesSeparatedBy(',')`` and each key is trimmed."""
    return [key.strip() for value in values for key in value.split(",")]


@topics.command("alter")
@click.argument("name")
@click.option("--add-config", "-a", "add", multiple=True,
              help="k1=v1,k2=[v2,v3] to set (repeatable); brackets hold a list value")
@click.option("--delete-config", "-d", "delete", multiple=True,
              help="k1,k2: overrides to remove, returning them to the default (repeatable)")
@click.option("--partitions", type=POSITIVE, default=None, help="grow the topic to this many partitions")
@click.option("--replica-assignment", type=REPLICA_ASSIGNMENT, default=None,
              help="with --partitions: brokers of every partition, e.g. 1:2,2:3,3:1 (the new ones are used)")
@click.option("--if-exists", is_flag=True, help="do nothing, quietly, when the topic does not exist")
@click.pass_context
def topics_alter(ctx, name, add, delete, partitions, replica_assignment, if_exists):
    """Grow a topic or change its config overrides (kafka-configs --alter for a topic)."""
    from broker.client import ConfigResource, NewPartitions
    configs, keys = parse_configs_to_add(add), parse_configs_to_delete(delete)
    if replica_assignment and partitions is None:
        raise click.UsageError("--replica-assignment needs --partitions: it places the partitions added")
    resource = ConfigResource("topic", name)
    with open_admin(ctx) as admin:
        if if_exists:           # TopicCommand.alterTopic: ensureTopicExists only without --if-exists
            info = admin.list_topics().topics.get(name)
            if info is None or info.error is not None:
                return
        if keys:
            _check_overrides(admin, resource, keys)
        if partitions is not None:
            new = None
            if replica_assignment:    # TopicCommand: the list covers every partition; the new ones are placed
                existing = len(admin.list_topics(name, timeout=30).topics[name].partitions)
                new = replica_assignment[existing:]
            admin.create_partitions([NewPartitions(name, partitions, new)])[name].result()
            click.echo(f"Topic {name} now has {partitions} partitions.")
            if not configs and not keys:
                return
        alter_incrementally(admin, resource, configs, keys)
    click.echo(f"Altered configs of topic {name}.")


def _check_overrides(admin, resource, keys: list[str]) -> None:
    """Kafka's ``ConfigCommand.alterResourceConfig``: deleting a key that is not an override of the
    topic (a typo, or a key already at its default) fails the command instead of doing nothing."""
    from broker.client import ConfigResource
    from broker.errors import InvalidConfigError
    entries = next(iter(admin.describe_configs([ConfigResource("topic", resource.name)]).values())).result()
    overrides = {k for k, e in entries.items() if e.source == "DYNAMIC_TOPIC_CONFIG"}
    invalid = [k for k in keys if k not in overrides]
    if invalid:
        raise InvalidConfigError(f"Invalid config(s): {','.join(invalid)}")
