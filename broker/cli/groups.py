"""``riverlog groups``: list, describe and delete consumer groups; delete and reset their offsets.

    riverlog groups list [--state [Stable,Empty]]   # with --state: GROUP STATE
    riverlog groups describe billing        # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID
    riverlog groups describe billing --members --verbose   # GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS ASSIGNMENT
    riverlog groups describe --all-groups --state   # GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS
    riverlog groups reset-offsets billing --topic orders --to-datetime 2026-11-01T00:00:00 --execute
    riverlog groups reset-offsets billing audit --all-topics --to-earliest --dry-run --export > plan.csv
    riverlog groups reset-offsets billing audit --from-file plan.csv --execute
    riverlog groups delete-offsets billing --topic old-orders
    riverlog groups delete billing          # or --all-groups

``describe``, ``delete`` and ``reset-offsets`` take group ids or ``--all-groups`` (not both), as
Kafka's kafka-consumer-groups.sh takes ``--group`` or ``--all-groups``. Reset is a dry run
(``--dry-run``, the default) unless ``--execute`` is given, and is refused for each group that has
active members (as Kafka's tool): stop the consumers first. ``--export`` prints the plan as Kafka's
CSV, which ``--from-file`` reads back.
"""
from __future__ import annotations

import click

from broker.cli.common import ReportErrors, open_admin, table
from broker.cli.group_description import (MISSING, Member, list_lines, members_lines, offset_rows, offsets_lines,
                                         state_lines, state_notice)
from broker.cli.group_selection import check_selection, chosen_groups, listed_groups, selected_partitions
from broker.cli.reset_offsets import groups_reset_offsets
from broker.errors import GroupIdNotFoundError, RiverlogError

@click.group(cls=ReportErrors)
def groups():
    """Consumer groups: members, committed offsets and lag."""


groups.add_command(groups_reset_offsets)   # broker.cli.reset_offsets


@groups.command("list")
@click.option("--state", "states", is_flag=False, flag_value="", default=None,
              help="show each group's state; with a value (Stable,Empty) only the groups in those states")
@click.option("--type", "types", is_flag=False, flag_value="", default=None,
              help="show each group's type; with a value (consumer,classic) only the groups of those types")
@click.pass_context
def groups_list(ctx, states, types):
    """Group ids, one a line; with --state or --type Kafka's ``GROUP [TYPE] [STATE]`` table."""
    from broker.client import ConsumerGroupState, ConsumerGroupType
    wanted_states = _parsed(states, {n.lower(): s for s in ConsumerGroupState if s != ConsumerGroupState.UNKNOWN
                                     for n in s._wire_names()}, "state", "states")
    wanted_types = _parsed(types, {t.name.lower(): t for t in ConsumerGroupType if t != ConsumerGroupType.UNKNOWN},
                           "types", "types")
    with open_admin(ctx) as admin:
        groups = listed_groups(admin, states=wanted_states, types=wanted_types)
    if states is None and types is None:
        for g in groups:
            click.echo(g.group_id)
        return
    for line in list_lines([(g.group_id, g.type.name.capitalize(), str(g.state)) for g in groups],
                           types is not None, states is not None):
        click.echo(line)


def _parsed(value: str | None, known: dict, what: str, plural: str) -> set | None:
    """Kafka's ``consumerGroupStatesFromString``/``consumerGroupTypesFromString``: a comma list,
    case-insensitive; an unknown name fails with the valid ones listed."""
    if not value:
        return None
    names = [v.strip().lower() for v in value.split(",")]
    if any(n not in known for n in names):
        valid = ", ".join(dict.fromkeys(str(v) if plural == "states" else v.name.capitalize() for v in known.values()))
        raise click.BadParameter(f"Invalid {what} list '{value}'. Valid {plural} are: {valid}",
                                 param_hint=f"'--{'state' if plural == 'states' else 'type'}'")
    return {known[n] for n in names}


@groups.command("describe")
@click.argument("group_ids", nargs=-1)
@click.option("--all-groups", is_flag=True, help="every group instead of the GROUP_IDs")
@click.option("--offsets", "show_offsets", is_flag=True, help="per partition: offsets, lag, member (the default)")
@click.option("--members", "show_members", is_flag=True, help="one line per member instead of per partition")
@click.option("--state", "show_state", is_flag=True, help="one line per group: coordinator, assignor, state, members")
@click.option("--verbose", is_flag=True, help="with --members: each member's ASSIGNMENT too")
@click.pass_context
def groups_describe(ctx, group_ids, all_groups, show_offsets, show_members, show_state, verbose):
    """Per partition: committed offset, log end offset (high watermark), lag and owning member.

    Printed as kafka-consumer-groups.sh --describe prints it (``broker.cli.group_description``).
    Every group named is described, as Kafka's ``ConsumerGroupService.describeGroups``: a group
    that does not exist gets ``Consumer group 'x' does not exist.`` (``shouldPrintMemberState``)
    and the next one is described; like kafka-consumer-groups.sh (``printError`` does not exit),
    that alone leaves the exit status 0. Any other error is printed too, and exits 1 at the end.
    ``--offsets``, ``--members`` and ``--state`` are exclusive, as ``checkArgs`` has them."""
    check_selection("describe", group_ids, all_groups)
    if show_offsets + show_members + show_state > 1:
        raise click.UsageError("Option describe takes at most one of these options: --members, --offsets, --state")
    failed = 0
    with open_admin(ctx) as admin:
        brokers = admin.list_topics().brokers if show_state else {}
        for group_id in chosen_groups(admin, group_ids, all_groups):
            try:
                if show_state:
                    out = _state_view(admin, group_id, brokers)
                else:
                    out = _members_view(admin, group_id, verbose) if show_members else _offsets_view(admin, group_id)
            except GroupIdNotFoundError as e:
                click.echo(f"Error: {e.name}: {e.message}", err=True)
                continue
            except RiverlogError as e:
                failed += 1
                click.echo(f"Error: group {group_id}: {e.name}: {e.message}", err=True)
                continue
            for line in out:
                click.echo(line)
    if failed:
        ctx.exit(1)


def _described(admin, group_id: str):
    """The group's description; one that does not exist (DEAD) raises kafka-consumer-groups.sh's
    answer; a group that is not Stable gets Kafka's notice on standard error."""
    from broker.client import ConsumerGroupState
    desc = admin.describe_consumer_groups([group_id])[group_id].result()
    if desc.state == ConsumerGroupState.DEAD:
        raise GroupIdNotFoundError(f"Consumer group '{group_id}' does not exist.")
    notice = state_notice(group_id, str(desc.state))
    if notice:
        click.echo(notice, err=True)
    return desc


def _members(desc) -> list[Member]:
    return [Member(m.member_id, m.host or MISSING, m.client_id or MISSING,
                   [(tp.topic, tp.partition) for tp in m.assignment.topic_partitions], m.group_instance_id)
            for m in desc.members]


def _state_view(admin, group_id: str, brokers: dict) -> list[str]:
    """Kafka's ``printStates``: group, coordinator ``host:port  (id)``, assignor, state, member count."""
    desc = _described(admin, group_id)
    return state_lines(group_id, f"{brokers.get(desc.coordinator, MISSING)}  ({desc.coordinator})",
                       desc.partition_assignor or "", str(desc.state), len(desc.members))


def _members_view(admin, group_id: str, verbose: bool) -> list[str]:
    return members_lines(group_id, _members(_described(admin, group_id)), verbose)


def _offsets_view(admin, group_id: str) -> list[str]:
    """Per partition: committed offset, log end offset (high watermark), lag and owning member."""
    from broker.client import ConsumerGroupTopicPartitions, OffsetSpec, TopicPartition
    members = _members(_described(admin, group_id))
    committed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id)])[group_id].result()
    offsets = {(tp.topic, tp.partition): tp.offset for tp in committed.topic_partitions}
    keys = sorted(set(offsets) | {tp for m in members for tp in m.partitions})
    futures = admin.list_offsets({TopicPartition(t, p): OffsetSpec.latest() for t, p in keys}) if keys else {}
    ends = {(tp.topic, tp.partition): f.result().offset for tp, f in futures.items()}
    return offsets_lines(offset_rows(group_id, members, offsets, ends))


@groups.command("delete")
@click.argument("group_ids", nargs=-1)
@click.option("--all-groups", is_flag=True, help="every group (those with members are refused)")
@click.pass_context
def groups_delete(ctx, group_ids, all_groups):
    """Delete empty groups and their committed offsets.

    As Kafka's ``deleteGroups``, every group is tried and each outcome reported; a group with
    members fails (NON_EMPTY_GROUP) and makes the exit status 1."""
    check_selection("delete", group_ids, all_groups)
    with open_admin(ctx) as admin:
        chosen = chosen_groups(admin, group_ids, all_groups)
        futures = admin.delete_consumer_groups(chosen) if chosen else {}
        failed = []
        for group_id in chosen:
            try:
                futures[group_id].result()
                click.echo(f"Deleted group {group_id}.")
            except RiverlogError as e:
                failed.append(e)
                click.echo(f"Error: group {group_id} was not deleted: {e}", err=True)
        if failed:
            raise failed[0]


@groups.command("delete-offsets")
@click.argument("group_id")
@click.option("--topic", "-t", "topics", multiple=True, required=True, help="TOPIC or TOPIC:P1,P2 (repeatable)")
@click.pass_context
def groups_delete_offsets(ctx, group_id, topics):
    """Forget the group's offsets of topics it no longer consumes; prints TOPIC PARTITION STATUS.

    As Kafka's ``ConsumerGroupCommand.deleteOffsets``: each partition's outcome is listed; the
    partitions of a topic the group still subscribes to fail (GROUP_SUBSCRIBED_TO_TOPIC) while the
    others' offsets are deleted. The exit status is 1 if any partition failed."""
    with open_admin(ctx) as admin:
        partitions = selected_partitions(admin, topics)
        result = admin.delete_consumer_group_offsets(group_id, partitions).result()
    failed = [tp for tp in result.topic_partitions if tp.error is not None]
    if failed:
        click.echo("Error: Encounter some partition level error, see the follow-up details:", err=True)
    else:
        click.echo(f"Request succeed for deleting offsets with topic {', '.join(topics)} group {group_id}")
    table([["TOPIC", "PARTITION", "STATUS"]] + [
        [tp.topic, str(tp.partition), "Successful" if tp.error is None else f"Error: {tp.error.name()}: {tp.error.str()}"]
        for tp in result.topic_partitions])
    if failed:
        ctx.exit(1)
