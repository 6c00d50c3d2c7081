"""``riverlog groups``: list, describe and delete consumer groups; delete and reset their offsets.

    riverlog groups list
    riverlog groups describe billing        # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG MEMBER
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
from broker.cli.group_selection import check_selection, chosen_groups, selected_partitions
from broker.cli.reset_offsets import groups_reset_offsets
from broker.errors import GroupIdNotFoundError, RiverlogError

@click.group(cls=ReportErrors)
def groups():
    """Consumer groups: members, committed offsets and lag."""


groups.add_command(groups_reset_offsets)   # broker.cli.reset_offsets


@groups.command("list")
@click.option("--state", is_flag=True, help="show each group's state too")
@click.pass_context
def groups_list(ctx, state):
    with open_admin(ctx) as admin:
        result = admin.list_consumer_groups().result()
    for g in result.valid:
        click.echo(f"{g.group_id}\t{g.state}" if state else g.group_id)


@groups.command("describe")
@click.argument("group_ids", nargs=-1)
@click.option("--all-groups", is_flag=True, help="every group instead of the GROUP_IDs")
@click.option("--offsets", "show_offsets", is_flag=True, help="per partition: offsets, lag, member (the default)")
@click.option("--members", "show_members", is_flag=True, help="one line per member instead of per partition")
@click.option("--state", "show_state", is_flag=True, help="one line per group: coordinator, assignor, state, members")
@click.pass_context
def groups_describe(ctx, group_ids, all_groups, show_offsets, show_members, show_state):
    """Per partition: committed offset, log end offset (high watermark), lag and owning member.

    Every group named is described, as Kafka's ``ConsumerGroupService.describeGroups``: a group
    that does not exist gets ``Consumer group 'x' does not exist.`` (``shouldPrintMemberState``)
    and the next one is described; like kafka-consumer-groups.sh (``printError`` does not exit),
    that alone leaves the exit status 0. Any other error is printed too, and exits 1 at the end.
    ``--offsets``, ``--members`` and ``--state`` are exclusive, as ``checkArgs`` has them."""
    check_selection("describe", group_ids, all_groups)
    if show_offsets + show_members + show_state > 1:
        raise click.UsageError("Option describe takes at most one of these options: --members, --offsets, --state")
    failed, states = 0, []
    with open_admin(ctx) as admin:
        brokers = admin.list_topics().brokers if show_state else {}
        for group_id in chosen_groups(admin, group_ids, all_groups):
            try:
                if show_state:
                    states.append(_state_row(admin, group_id, brokers))
                else:
                    _describe_group(admin, group_id, show_members)
            except GroupIdNotFoundError as e:
                click.echo(f"Error: {e.name}: {e.message}", err=True)
            except RiverlogError as e:
                failed += 1
                click.echo(f"Error: group {group_id}: {e.name}: {e.message}", err=True)
    if states:
        table([["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]] + states)
    if failed:
        ctx.exit(1)


def _described(admin, group_id: str):
    """The group's description; one that does not exist (DEAD) raises kafka-consumer-groups.sh's answer."""
    from broker.client import ConsumerGroupState
    desc = admin.describe_consumer_groups([group_id])[group_id].result()
    if desc.state == ConsumerGroupState.DEAD:
        raise GroupIdNotFoundError(f"Consumer group '{group_id}' does not exist.")
    return desc


def _state_row(admin, group_id: str, brokers: dict) -> list[str]:
    """Kafka's ``printStates`` row: group, coordinator ``host:port (id)``, assignor, state, member count."""
    desc = _described(admin, group_id)
    return [group_id, f"{brokers.get(desc.coordinator, '-')} ({desc.coordinator})", desc.partition_assignor or "-",
            str(desc.state), str(len(desc.members))]


def _describe_group(admin, group_id: str, show_members: bool) -> None:
    """One group's members (``show_members``) or per-partition offsets and lag."""
    from broker.client import ConsumerGroupTopicPartitions, OffsetSpec, TopicPartition
    desc = _described(admin, group_id)
    if show_members:
        rows = [["GROUP", "MEMBER", "INSTANCE", "CLIENT-ID", "EPOCH", "ASSIGNMENT"]]
        for m in desc.members:
            parts = ",".join(f"{tp.topic}:{tp.partition}" for tp in sorted(m.assignment.topic_partitions))
            rows.append([group_id, m.member_id, m.group_instance_id or "-", m.client_id or "-",
                         str(m.member_epoch), parts or "-"])
        click.echo(f"Group {group_id} is {desc.state} ({desc.partition_assignor or 'no assignor'}, "
                   f"epoch {desc.group_epoch}, coordinator {desc.coordinator})")
        table(rows)
        return
    committed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id)])[group_id].result()
    offsets = {(tp.topic, tp.partition): tp.offset for tp in committed.topic_partitions}
    owner = {(tp.topic, tp.partition): m.member_id for m in desc.members
             for tp in m.assignment.topic_partitions}
    keys = sorted(set(offsets) | set(owner))
    ends = admin.list_offsets({TopicPartition(t, p): OffsetSpec.latest() for t, p in keys})
    rows = [["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER"]]
    for tp, future in sorted(ends.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        topic, partition, end = tp.topic, tp.partition, future.result().offset
        current = offsets.get((topic, partition))
        rows.append([group_id, topic, str(partition), "-" if current is None else str(current), str(end),
                     "-" if current is None else str(end - current),   # Kafka's getLag: negative shows a bad commit
                     owner.get((topic, partition), "-")])
    click.echo(f"Group {group_id} is {desc.state} with {len(desc.members)} member(s).")
    if len(rows) > 1:
        table(rows)


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
