"""``riverlog groups``: list, describe and delete consumer groups; delete and reset their offsets.

    riverlog groups list
    riverlog groups describe billing        # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG MEMBER
    riverlog groups reset-offsets billing --topic orders --to-datetime 2026-11-01T00:00:00 --execute
    riverlog groups delete-offsets billing --topic old-orders
    riverlog groups delete billing

Reset is a dry run unless ``--execute`` is given, and is refused while the group has active
members (as Kafka's kafka-consumer-groups.sh): stop the consumers first.
"""
from __future__ import annotations

import re
import time

import click

from broker.cli.common import ReportErrors, open_admin, partitions_of, table
from broker.cli.params import DATETIME, OFFSET
from broker.errors import GroupIdNotFoundError, InvalidRequestError, NonEmptyGroupError, RiverlogError

_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


@click.group(cls=ReportErrors)
def groups():
    """Consumer groups: members, committed offsets and lag."""


@groups.command("list")
@click.option("--state", is_flag=True, help="show each group's state too")
@click.pass_context
def groups_list(ctx, state):
    with open_admin(ctx) as admin:
        result = admin.list_consumer_groups().result()
    for g in result.valid:
        click.echo(f"{g.group_id}\t{g.state}" if state else g.group_id)


@groups.command("describe")
@click.argument("group_ids", nargs=-1, required=True)
@click.option("--members", "show_members", is_flag=True, help="one line per member instead of per partition")
@click.pass_context
def groups_describe(ctx, group_ids, show_members):
    """Per partition: committed offset, log end offset (high watermark), lag and owning member."""
    from broker.client import ConsumerGroupState, ConsumerGroupTopicPartitions, OffsetSpec
    with open_admin(ctx) as admin:
        for group_id in group_ids:
            desc = admin.describe_consumer_groups([group_id])[group_id].result()
            if desc.state == ConsumerGroupState.DEAD:  # kafka-consumer-groups.sh's answer for it
                raise GroupIdNotFoundError(f"Consumer group '{group_id}' does not exist.")
            if show_members:
                rows = [["GROUP", "MEMBER", "INSTANCE", "CLIENT-ID", "EPOCH", "ASSIGNMENT"]]
                for m in desc.members:
                    parts = ",".join(f"{tp.topic}:{tp.partition}" for tp in sorted(m.assignment.topic_partitions))
                    rows.append([group_id, m.member_id, m.group_instance_id or "-", m.client_id or "-",
                                 str(m.member_epoch), parts or "-"])
                click.echo(f"Group {group_id} is {desc.state} ({desc.partition_assignor or 'no assignor'}, "
                           f"epoch {desc.group_epoch}, coordinator {desc.coordinator})")
                table(rows)
                continue
            committed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id)])[group_id].result()
            offsets = {(tp.topic, tp.partition): tp.offset for tp in committed.topic_partitions}
            owner = {(tp.topic, tp.partition): m.member_id for m in desc.members
                     for tp in m.assignment.topic_partitions}
            keys = sorted(set(offsets) | set(owner))
            from broker.client import TopicPartition
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
@click.argument("group_ids", nargs=-1, required=True)
@click.pass_context
def groups_delete(ctx, group_ids):
    """Delete empty groups and their committed offsets."""
    with open_admin(ctx) as admin:
        futures = admin.delete_consumer_groups(list(group_ids))
        failed = []
        for group_id in group_ids:        # every outcome reported, as Kafka's tool lists both kinds
            try:
                futures[group_id].result()
                click.echo(f"Deleted group {group_id}.")
            except RiverlogError as e:
                failed.append(e)
                click.echo(f"Error: group {group_id} was not deleted: {e}", err=True)
        if failed:
            raise failed[0]


def _selected(admin, topics: tuple[str, ...]) -> list:
    """``orders`` (every partition) or ``orders:0,2`` as TopicPartitions. As Kafka's
    ``parseTopicsWithPartitions``, ``orders:`` (a colon and no partition) is refused: it used to
    select every partition, so an empty variable in a script reset them all."""
    from broker.client import TopicPartition
    out = []
    for spec in topics:
        name, colon, parts = spec.partition(":")
        if not colon:
            out += [TopicPartition(name, p) for p in partitions_of(admin, name)]
            continue
        numbers = [p.strip() for p in parts.split(",") if p.strip()]
        if not name or not numbers:
            raise click.BadParameter(f"invalid topic arg {spec!r}: expected TOPIC or TOPIC:P1,P2", param_hint="--topic")
        for p in numbers:
            if not p.isdigit():
                raise click.BadParameter(f"invalid partition {p!r} in {spec!r}: partitions are numbers",
                                         param_hint="--topic")
        out += [TopicPartition(name, int(p)) for p in numbers]
    return out


@groups.command("delete-offsets")
@click.argument("group_id")
@click.option("--topic", "-t", "topics", multiple=True, required=True, help="TOPIC or TOPIC:P1,P2 (repeatable)")
@click.pass_context
def groups_delete_offsets(ctx, group_id, topics):
    """Forget the group's offsets of topics it no longer consumes."""
    with open_admin(ctx) as admin:
        partitions = _selected(admin, topics)
        admin.delete_consumer_group_offsets(group_id, partitions).result()
    click.echo(f"Deleted the offsets of {len(partitions)} partition(s) from group {group_id}.")


def parse_duration(value: str) -> int:
    """ISO-8601 ``PnDTnHnMnS`` (as Kafka's --by-duration) in milliseconds."""
    m = _DURATION.match(value.strip().upper())
    if not m or not any(m.groups()):
        raise click.BadParameter(f"{value!r} is not an ISO-8601 duration such as PT1H30M or P1DT12H")
    days, hours, minutes, seconds = (float(x) if x else 0.0 for x in m.groups())
    return int(((days * 24 + hours) * 60 + minutes) * 60_000 + seconds * 1000)


@groups.command("reset-offsets")
@click.argument("group_id")
@click.option("--topic", "-t", "topics", multiple=True, help="TOPIC or TOPIC:P1,P2 (repeatable)")
@click.option("--all-topics", is_flag=True, help="every topic the group has offsets for")
@click.option("--to-earliest", "how", flag_value="earliest")
@click.option("--to-latest", "how", flag_value="latest")
@click.option("--to-current", "how", flag_value="current")
@click.option("--to-offset", type=OFFSET, default=None)
@click.option("--to-datetime", type=DATETIME, default=None,
              help="YYYY-MM-DDTHH:mm:SS[.sss][zone], UTC unless a zone is given")
@click.option("--by-duration", default=None, help="ISO-8601 duration back from now, e.g. PT1H")
@click.option("--shift-by", type=OFFSET, default=None, help="move each committed offset by N (may be negative)")
@click.option("--execute", is_flag=True, help="apply (default: only show the new offsets)")
@click.pass_context
def groups_reset_offsets(ctx, group_id, topics, all_topics, how, to_offset, to_datetime, by_duration, shift_by,
                         execute):
    """Set a stopped group's committed offsets; prints GROUP TOPIC PARTITION NEW-OFFSET."""
    from broker.client import ConsumerGroupTopicPartitions, OffsetSpec, TopicPartition
    chosen = [x for x in (how, to_offset, to_datetime, by_duration, shift_by) if x is not None]
    if len(chosen) != 1:
        raise click.UsageError("give exactly one of --to-earliest, --to-latest, --to-current, --to-offset, "
                               "--to-datetime, --by-duration, --shift-by")
    if bool(topics) == all_topics:
        raise click.UsageError("give --topic (repeatable) or --all-topics")
    with open_admin(ctx) as admin:
        desc = admin.describe_consumer_groups([group_id])[group_id]
        try:
            active = [m for m in desc.result().members]
        except Exception:  # noqa: BLE001 - a group with no state yet has no members either
            active = []
        if active:
            raise NonEmptyGroupError(f"offsets of group '{group_id}' can only be reset while it has no members; "
                                     f"it has {len(active)}")
        committed_tps = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group_id)])[group_id].result().topic_partitions
        committed = {(tp.topic, tp.partition): tp.offset for tp in committed_tps}
        partitions = sorted(_selected(admin, topics)) if topics else sorted(
            TopicPartition(t, p) for t, p in committed)
        if not partitions:
            raise InvalidRequestError(f"group '{group_id}' has no offsets to reset")

        def listed(spec):
            return {(tp.topic, tp.partition): f.result().offset
                    for tp, f in admin.list_offsets({tp: spec for tp in partitions}).items()}
        earliest, latest = listed(OffsetSpec.earliest()), listed(OffsetSpec.latest())
        if to_datetime is not None or by_duration is not None:
            when = to_datetime if to_datetime is not None else \
                int(time.time() * 1000) - parse_duration(by_duration)
            at = listed(OffsetSpec.for_timestamp(when))
        new = {}
        for tp in partitions:
            key = (tp.topic, tp.partition)
            if how == "earliest":
                offset = earliest[key]
            elif how == "latest":
                offset = latest[key]
            elif how == "current":
                offset = committed.get(key, latest[key])
            elif to_offset is not None:
                offset = to_offset
            elif shift_by is not None:
                if key not in committed:
                    raise InvalidRequestError(f"{tp.topic}:{tp.partition} has no committed offset to shift")
                offset = committed[key] + shift_by
            else:
                offset = at[key] if at[key] >= 0 else latest[key]
            new[key] = min(max(offset, earliest[key]), latest[key])
        targets = [TopicPartition(t, p, o) for (t, p), o in sorted(new.items())]
        if execute:
            admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id, targets)])[group_id].result()
    rows = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]] + [[group_id, tp.topic, str(tp.partition), str(tp.offset)]
                                                           for tp in targets]
    table(rows)
    if not execute:
        click.echo("(dry run: add --execute to apply)")
