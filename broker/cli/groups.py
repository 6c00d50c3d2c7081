"""``riverlog groups``: list, describe and delete consumer groups; delete and reset their offsets.

    riverlog groups list
    riverlog groups describe billing        # GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG MEMBER
    riverlog groups reset-offsets billing --topic orders --to-datetime 2026-11-01T00:00:00 --execute
    riverlog groups delete-offsets billing --topic old-orders
    riverlog groups delete billing

Reset is a dry run (``--dry-run``, the default) unless ``--execute`` is given, and is refused while
the group has active members (as Kafka's kafka-consumer-groups.sh): stop the consumers first.
"""
from __future__ import annotations

import re
import time

import click

from broker.cli.common import ReportErrors, open_admin, partitions_of, table
from broker.cli.params import DATETIME, OFFSET
from broker.errors import GroupIdNotFoundError, InvalidRequestError, NonEmptyGroupError, RiverlogError

# java.time.Duration.parse's pattern: sign, days, then a 'T' part of hours, minutes, seconds[.fraction].
_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?"
                       r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
                       re.IGNORECASE)


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
    """Per partition: committed offset, log end offset (high watermark), lag and owning member.

    Every group named is described, as Kafka's ``ConsumerGroupService.describeGroups``: a group
    that does not exist gets ``Consumer group 'x' does not exist.`` (``shouldPrintMemberState``)
    and the next one is described; like kafka-consumer-groups.sh (``printError`` does not exit),
    that alone leaves the exit status 0. Any other error is printed too, and exits 1 at the end."""
    failed = 0
    with open_admin(ctx) as admin:
        for group_id in group_ids:
            try:
                _describe_group(admin, group_id, show_members)
            except GroupIdNotFoundError as e:
                click.echo(f"Error: {e.name}: {e.message}", err=True)
            except RiverlogError as e:
                failed += 1
                click.echo(f"Error: group {group_id}: {e.name}: {e.message}", err=True)
    if failed:
        ctx.exit(1)


def _describe_group(admin, group_id: str, show_members: bool) -> None:
    """One group's members (``show_members``) or per-partition offsets and lag."""
    from broker.client import ConsumerGroupState, ConsumerGroupTopicPartitions, OffsetSpec, TopicPartition
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
    select every partition, so an empty variable in a script reset them all. An empty partition
    inside the list (``orders:0,,1``) is refused too (``Integer.parseInt("")``); a trailing comma
    is not (``String.split`` drops it)."""
    from broker.client import TopicPartition
    out = []
    for spec in topics:
        name, colon, parts = spec.partition(":")
        if not colon:
            out += [TopicPartition(name, p) for p in partitions_of(admin, name)]
            continue
        numbers = [p.strip() for p in parts.split(",")]
        while numbers and numbers[-1] == "":     # Java's String.split drops trailing empty strings
            numbers.pop()
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
    """Forget the group's offsets of topics it no longer consumes; prints TOPIC PARTITION STATUS.

    As Kafka's ``ConsumerGroupCommand.deleteOffsets``: each partition's outcome is listed; the
    partitions of a topic the group still subscribes to fail (GROUP_SUBSCRIBED_TO_TOPIC) while the
    others' offsets are deleted. The exit status is 1 if any partition failed."""
    with open_admin(ctx) as admin:
        partitions = _selected(admin, topics)
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


def parse_duration(value: str) -> int:
    """Java's ``Duration.parse`` (Kafka's --by-duration) in milliseconds: ``[-+]PnDTnHnMn.nS``, each
    number signed (``-PT1H`` and ``PT-1H`` are an hour back to the future), case-insensitive; a 'T'
    needs a time part after it (``P1DT`` is refused), as is a bare ``P``."""
    m = _DURATION.fullmatch(value.strip())
    if not m or m.group(3) in ("T", "t") or not any(m.group(i) for i in (2, 4, 5, 6)):
        raise click.BadParameter(f"{value!r} is not an ISO-8601 duration such as PT1H30M, P1DT12H or -PT15M",
                                 param_hint="--by-duration")
    days, hours, minutes, seconds = (int(m.group(i) or 0) for i in (2, 4, 5, 6))
    fraction = (m.group(7) or "").ljust(9, "0")
    nanos = int(fraction) * (-1 if (m.group(6) or "").startswith("-") else 1)
    ms = (((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000 + int(nanos / 1_000_000)
    return -ms if m.group(1) == "-" else ms


_SCENARIOS = ("--to-earliest", "--to-latest", "--to-current", "--to-offset", "--to-datetime", "--by-duration",
              "--shift-by")


def _one(values: tuple, option: str):
    """The value of an option given at most once (joptsimple's ``valueOf`` refuses several)."""
    if len(values) > 1:
        raise click.UsageError(f"Found multiple arguments for option {option}, but you asked for only one")
    return values[0] if values else None


@groups.command("reset-offsets")
@click.argument("group_id")
@click.option("--topic", "-t", "topics", multiple=True, help="TOPIC or TOPIC:P1,P2 (repeatable)")
@click.option("--all-topics", is_flag=True, help="every topic the group has offsets for")
@click.option("--to-earliest", is_flag=True, help="the log start offset")
@click.option("--to-latest", is_flag=True, help="the log end offset")
@click.option("--to-current", is_flag=True, help="the committed offset as it is (the log end where none)")
@click.option("--to-offset", type=OFFSET, multiple=True, help="this offset (kept within the log)")
@click.option("--to-datetime", type=DATETIME, multiple=True,
              help="YYYY-MM-DDTHH:mm:SS[.sss][zone], UTC unless a zone is given")
@click.option("--by-duration", multiple=True, help="ISO-8601 duration back from now, e.g. PT1H")
@click.option("--shift-by", type=OFFSET, multiple=True,
              help="move each committed offset by N (may be negative; kept within the log)")
@click.option("--dry-run", is_flag=True, help="only show the new offsets (the default)")
@click.option("--execute", is_flag=True, help="apply the new offsets")
@click.pass_context
def groups_reset_offsets(ctx, group_id, topics, all_topics, to_earliest, to_latest, to_current, to_offset,
                         to_datetime, by_duration, shift_by, dry_run, execute):
    """Set a stopped group's committed offsets; prints GROUP TOPIC PARTITION NEW-OFFSET.

    Options are checked as Kafka's ``ConsumerGroupCommandOptions.checkArgs``: exactly one scenario,
    and ``--execute`` or ``--dry-run``, not both. New offsets follow ``prepareOffsetsToReset``: only
    ``--to-offset`` and ``--shift-by`` are moved into [log start, log end] (``checkOffsetsRange``);
    ``--to-current`` keeps each committed offset as it is."""
    from broker.client import ConsumerGroupTopicPartitions, OffsetSpec, TopicPartition
    to_offset, to_datetime = _one(to_offset, "--to-offset"), _one(to_datetime, "--to-datetime")
    by_duration, shift_by = _one(by_duration, "--by-duration"), _one(shift_by, "--shift-by")
    given = [name for name, value in zip(_SCENARIOS, (to_earliest or None, to_latest or None, to_current or None,
                                                      to_offset, to_datetime, by_duration, shift_by))
             if value is not None]
    if not given:
        raise click.UsageError(f"Option '--reset-offsets' requires one of the following scenarios: "
                               f"{', '.join(_SCENARIOS)}")
    if len(given) > 1:
        raise click.UsageError(f'Option "{given[0]}" can\'t be used with option "{given[1]}"')
    if dry_run and execute:
        raise click.UsageError("Option --reset-offsets only accepts one of --execute and --dry-run")
    if bool(topics) == all_topics:
        raise click.UsageError("give --topic (repeatable) or --all-topics")
    if by_duration is not None:
        to_datetime = int(time.time() * 1000) - parse_duration(by_duration)
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
        if to_datetime is not None:
            # A time before the epoch: every record is at or after it (Kafka's search for the first
            # offset with a timestamp >= it finds the log start); ListOffsets takes no negative time.
            at = earliest if to_datetime < 0 else listed(OffsetSpec.for_timestamp(to_datetime))
        new = {}
        for tp in partitions:
            key = (tp.topic, tp.partition)
            if to_earliest:
                new[key] = earliest[key]
            elif to_latest:
                new[key] = latest[key]
            elif to_current:
                new[key] = committed.get(key, latest[key])
            elif to_datetime is not None:     # getLogTimestampOffsets: no record that late -> the log end
                new[key] = at[key] if at[key] >= 0 else latest[key]
            else:
                if to_offset is not None:
                    offset = to_offset
                elif key not in committed:
                    raise InvalidRequestError(f"{tp.topic}:{tp.partition} has no committed offset to shift")
                else:
                    offset = committed[key] + shift_by
                new[key] = min(max(offset, earliest[key]), latest[key])    # checkOffsetsRange
        targets = [TopicPartition(t, p, o) for (t, p), o in sorted(new.items())]
        if execute:
            admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id, targets)])[group_id].result()
    rows = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]] + [[group_id, tp.topic, str(tp.partition), str(tp.offset)]
                                                           for tp in targets]
    table(rows)
    if not execute:
        click.echo("(dry run: add --execute to apply)")
