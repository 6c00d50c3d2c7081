"""``riverlog configs``: describe and alter the configs of topics, brokers and groups, as Kafka's
kafka-configs.sh (``ConfigCommand``) does, with its options and its output.

    riverlog configs --entity-type topics --entity-name orders --describe
    riverlog configs --entity-type brokers --entity-name 1 --describe --all
    riverlog configs --entity-type topics --entity-name orders --alter --add-config retention.ms=3600000
    riverlog configs --topic orders --alter --delete-config retention.ms      # Kafka's short form

``--describe`` prints, per entity, ``Dynamic configs for topic orders are:`` (``All configs`` with
``--all``) and one line per config, sorted by name:
``  retention.ms=3600000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=3600000, ...}``.
Without a name every topic, every broker (then the cluster's defaults) or every group is described.
Brokers take their configs at start-up, so a broker has no dynamic configs (``--all`` shows them
all) and altering one fails; groups have none either.
"""
from __future__ import annotations

import click

from broker.cli.common import ReportErrors, alter_incrementally, open_admin
from broker.cli.group_selection import listed_groups
from broker.cli.topics import parse_configs_to_add, parse_configs_to_delete

ENTITY_TYPES = {"topics": ("topic", "DYNAMIC_TOPIC_CONFIG"), "brokers": ("broker", "DYNAMIC_BROKER_CONFIG"),
                "groups": ("group", "GROUP_CONFIG")}
DEFAULT_ENTITY = ""      # ConfigCommand's BrokerDefaultEntityName


def config_line(entry) -> str:
    """``ConfigCommand.describeResourceConfig``'s line for one config entry."""
    synonyms = ", ".join(f"{s.source}:{s.name}={s.value}" for s in entry.synonyms.values())
    return f"  {entry.name}={entry.value} sensitive={str(entry.is_sensitive).lower()} synonyms={{{synonyms}}}"


@click.command("configs")
@click.option("--entity-type", type=click.Choice(sorted(ENTITY_TYPES)), default=None)
@click.option("--entity-name", default=None, help="the topic, broker id or group")
@click.option("--entity-default", is_flag=True, help="the brokers' cluster-wide defaults")
@click.option("--topic", default=None, help="--entity-type topics --entity-name TOPIC")
@click.option("--broker", default=None, help="--entity-type brokers --entity-name BROKER")
@click.option("--broker-defaults", is_flag=True, help="--entity-type brokers --entity-default")
@click.option("--group", default=None, help="--entity-type groups --entity-name GROUP")
@click.option("--describe", is_flag=True, help="list the entity's configs")
@click.option("--all", "describe_all", is_flag=True, help="with --describe: every config, not only dynamic ones")
@click.option("--alter", is_flag=True, help="change the entity's configs")
@click.option("--add-config", "add", multiple=True, help="k1=v1,k2=[v2,v3]: configs to set")
@click.option("--delete-config", "delete", multiple=True, help="k1,k2: configs to remove")
@click.pass_context
def configs(ctx, entity_type, entity_name, entity_default, topic, broker, broker_defaults, group, describe,
            describe_all, alter, add, delete):
    """Describe or alter topic, broker and group configs (kafka-configs)."""
    entity_type, name = _entity(entity_type, entity_name, entity_default, topic, broker, broker_defaults, group)
    if describe == alter:
        raise click.UsageError("Command must include exactly one action: --describe, --alter")
    if describe_all and not describe:
        raise click.UsageError("--all can only be used with --describe")
    if describe and (add or delete):
        raise click.UsageError("--add-config and --delete-config can only be used with --alter")
    if entity_type == "brokers" and name not in (None, DEFAULT_ENTITY) and not name.isdigit():
        raise click.UsageError(f"The entity name for brokers must be a valid integer broker id, but it is: {name}")
    if describe:
        _describe(ctx, entity_type, name, describe_all)
    else:
        _alter(ctx, entity_type, name, add, delete)


def _entity(entity_type, entity_name, entity_default, topic, broker, broker_defaults, group) -> tuple[str, str | None]:
    """The entity type and name (None: every entity; ``DEFAULT_ENTITY``: the brokers' defaults),
    from ``--entity-type``/``--entity-name``/``--entity-default`` or one of the short forms."""
    short = [(t, n) for t, n in (("topics", topic), ("brokers", broker), ("groups", group)) if n is not None]
    if broker_defaults:
        short.append(("brokers", DEFAULT_ENTITY))
    if short and (entity_type or entity_name is not None or entity_default):
        raise click.UsageError("--entity-{type,name,default} should not be used in conjunction with specific "
                               "entity flags")
    if len(short) > 1:
        raise click.UsageError("Only one entity may be specified")
    if short:
        return short[0]
    if entity_type is None:
        raise click.UsageError("At least one entity type must be specified")
    if entity_name is not None and entity_default:
        raise click.UsageError("--entity-name and --entity-default cannot be given together")
    if entity_default and entity_type != "brokers":
        raise click.UsageError(f"--entity-default is for brokers, not {entity_type}")
    return entity_type, DEFAULT_ENTITY if entity_default else entity_name


def _describe(ctx, entity_type: str, name: str | None, describe_all: bool) -> None:
    from broker.client import ConfigResource
    singular, dynamic = ENTITY_TYPES[entity_type]
    with open_admin(ctx) as admin:
        if name is not None:
            entities = [name]
        elif entity_type == "topics":
            entities = sorted(admin.list_topics().topics)
        elif entity_type == "brokers":
            entities = [str(n.id) for n in sorted(admin.describe_cluster().result().nodes, key=lambda n: n.id)]
            entities.append(DEFAULT_ENTITY)
        else:
            entities = sorted(g.group_id for g in listed_groups(admin))
        for entity in entities:
            if entity == DEFAULT_ENTITY:
                # brokers read their configs at start-up: there are no cluster-wide dynamic defaults
                click.echo(f"Default configs for {entity_type} in the cluster are:")
                continue
            click.echo(f"{'All' if describe_all else 'Dynamic'} configs for {singular} {entity} are:")
            resource = ConfigResource(singular, entity)
            entries = next(iter(admin.describe_configs([resource]).values())).result()
            for key in sorted(entries):
                if describe_all or entries[key].source == dynamic:
                    click.echo(config_line(entries[key]))


def _alter(ctx, entity_type: str, name: str | None, add, delete) -> None:
    from broker.client import ConfigResource
    from broker.errors import InvalidConfigError
    singular, dynamic = ENTITY_TYPES[entity_type]
    if name is None:
        raise click.UsageError(f"An entity name must be specified with --alter of {entity_type}")
    if not add and not delete:
        raise click.UsageError("At least one of --add-config, --add-config-file, or --delete-config must be "
                               "specified with --alter")
    to_add, to_delete = parse_configs_to_add(add), parse_configs_to_delete(delete)
    if name == DEFAULT_ENTITY:
        raise InvalidConfigError("brokers read their configs at start-up; there are no cluster-wide dynamic "
                                 "defaults to alter")
    resource = ConfigResource(singular, name)
    with open_admin(ctx) as admin:
        entries = next(iter(admin.describe_configs([resource]).values())).result()
        invalid = [k for k in to_delete if k not in entries or entries[k].source != dynamic]
        if invalid:                       # ConfigCommand.alterResourceConfig: fail, do not do nothing
            raise InvalidConfigError(f"Invalid config(s): {','.join(invalid)}")
        alter_incrementally(admin, resource, to_add, to_delete)
    click.echo(f"Completed updating config for {singular} {name}.")
