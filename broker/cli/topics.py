"""``riverlog topics``: create, list, describe, alter, delete topics and elect preferred leaders.

    riverlog topics create orders --partitions 3 --config retention.ms=86400000
    riverlog topics describe orders
    riverlog topics alter orders --add-config retention.ms=3600000 --partitions 6
"""
from __future__ import annotations

import click

from broker.cli.common import ReportErrors, open_admin, pairs
from broker.cli.params import PARTITION, PARTITION_COUNT, POSITIVE, REPLICATION_FACTOR


@click.group(cls=ReportErrors)
def topics():
    """Create, list, describe, alter and delete topics."""


@topics.command("create")
@click.argument("name")
@click.option("--partitions", "-p", type=PARTITION_COUNT, default=-1, help="default: the broker's num.partitions")
@click.option("--replication-factor", "-r", type=REPLICATION_FACTOR, default=-1)
@click.option("--config", "-c", "configs", multiple=True, help="key=value topic config (repeatable)")
@click.option("--if-not-exists", is_flag=True, help="succeed quietly when the topic exists")
@click.pass_context
def topics_create(ctx, name, partitions, replication_factor, configs, if_not_exists):
    from broker.client import NewTopic
    from broker.errors import TopicAlreadyExistsError
    with open_admin(ctx) as admin:
        future = admin.create_topics([NewTopic(name, partitions, replication_factor, pairs(configs, "--config"))])[name]
        try:
            future.result()
        except TopicAlreadyExistsError:
            if not if_not_exists:
                raise
    click.echo(f"Created topic {name}.")


@topics.command("list")
@click.option("--all", "show_internal", is_flag=True, help="include internal topics")
@click.pass_context
def topics_list(ctx, show_internal):
    with open_admin(ctx) as admin:
        md = admin.list_topics()
    for name in sorted(md.topics):
        if show_internal or not name.startswith("__"):
            click.echo(name)


@topics.command("describe")
@click.argument("names", nargs=-1)
@click.pass_context
def topics_describe(ctx, names):
    from broker.client import ConfigResource
    from broker.errors import UnknownTopicOrPartitionError
    with open_admin(ctx) as admin:
        md = admin.list_topics()
        wanted = names or sorted(n for n in md.topics if not n.startswith("__"))
        for name in wanted:
            topic = md.topics.get(name)
            if topic is None or topic.error is not None:
                raise UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
            entries = admin.describe_configs([ConfigResource("topic", name)])
            configs = next(iter(entries.values())).result()
            overrides = ",".join(f"{k}={e.value}" for k, e in sorted(configs.items())
                                 if e.source == "DYNAMIC_TOPIC_CONFIG")
            parts = topic.partitions
            rf = len(next(iter(parts.values())).replicas) if parts else 0
            click.echo(f"Topic: {name}\tTopicId: {topic.topic_id}\tPartitionCount: {len(parts)}\t"
                       f"ReplicationFactor: {rf}\tConfigs: {overrides}")
            for p in sorted(parts.values(), key=lambda x: x.partition):
                click.echo(f"\tTopic: {name}\tPartition: {p.partition}\tLeader: {p.leader}\t"
                           f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}")


@topics.command("delete")
@click.argument("name")
@click.pass_context
def topics_delete(ctx, name):
    with open_admin(ctx) as admin:
        admin.delete_topics([name])[name].result()
    click.echo(f"Deleted topic {name}.")


@topics.command("elect-leaders")
@click.argument("name")
@click.option("--partition", "-p", "partitions", type=PARTITION, multiple=True, help="default: every partition")
@click.pass_context
def topics_elect_leaders(ctx, name, partitions):
    """Move leadership back to the preferred (first) replicas that are in sync."""
    with open_admin(ctx) as admin:
        admin.elect_leaders(name, list(partitions) or None).result()
    click.echo(f"Preferred leaders elected for {name}.")


@topics.command("alter")
@click.argument("name")
@click.option("--add-config", "-a", "add", multiple=True, help="key=value to set (repeatable)")
@click.option("--delete-config", "-d", "delete", multiple=True, help="key to return to its default")
@click.option("--partitions", type=POSITIVE, default=None, help="grow the topic to this many partitions")
@click.pass_context
def topics_alter(ctx, name, add, delete, partitions):
    from broker.client import AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions
    if partitions is not None:
        with open_admin(ctx) as admin:
            admin.create_partitions([NewPartitions(name, partitions)])[name].result()
        click.echo(f"Topic {name} now has {partitions} partitions.")
        if not add and not delete:
            return
    resource = ConfigResource("topic", name)
    for key, value in pairs(add, "--add-config").items():
        resource.add_incremental_config(ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET))
    for key in delete:
        resource.add_incremental_config(ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE))
    with open_admin(ctx) as admin:
        next(iter(admin.incremental_alter_configs([resource]).values())).result()
    click.echo(f"Altered configs of topic {name}.")
