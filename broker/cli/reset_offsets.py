"""``riverlog groups reset-offsets``: set stopped groups' committed offsets, as Kafka's
kafka-consumer-groups.sh ``--reset-offsets``: one scenario (``--to-earliest`` ... ``--from-file``),
a dry run unless ``--execute``, ``--export`` printing the plan as Kafka's CSV for ``--from-file``."""
from __future__ import annotations

import csv
import io
import re
import time

import click

from broker.cli.common import open_admin
from broker.cli.group_selection import check_selection, chosen_groups, selected_partitions
from broker.cli.params import DATETIME, OFFSET
from broker.errors import InvalidRequestError, NonEmptyGroupError, RiverlogError

# java.time.Duration.parse's pattern: sign, days, then a 'T' part of hours, minutes, seconds[.fraction].
_DURATION = re.compile(r"([-+]?)P(?:([-+]?[0-9]+)D)?"
                       r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
                       re.IGNORECASE)


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
              "--shift-by", "--from-file")
_NUMBER = re.compile(r"\s*[-+]?[0-9]+\s*")


def _one(values: tuple, option: str):
    """The value of an option given at most once (joptsimple's ``valueOf`` refuses several)."""
    if len(values) > 1:
        raise click.UsageError(f"Found multiple arguments for option {option}, but you asked for only one")
    return values[0] if values else None


def read_reset_plan(text: str, single_group: str | None) -> dict[str, dict[tuple[str, int], int]]:
    """Kafka's ``parseResetPlan``: group -> {(topic, partition): offset}. When one group is named
    (``single_group``) and the first line is ``topic,partition,offset`` (the old single-group file)
    every line has that shape; otherwise every line is ``group,topic,partition,offset``. Lines are
    split on newlines with the trailing empty ones dropped (Java's ``String.split``), and read as
    CSV, so a quoted group id may hold a comma; anything else is a bad ``--from-file``."""
    lines = text.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    rows = [next(csv.reader([line.rstrip("\r")]), []) for line in lines]
    old = single_group is not None and bool(rows) and len(rows[0]) == 3 \
        and all(_NUMBER.fullmatch(v) for v in rows[0][1:])
    plan: dict[str, dict[tuple[str, int], int]] = {}
    for n, row in enumerate(rows, 1):
        row = [single_group, *row] if old else row
        if len(row) != 4 or not all(_NUMBER.fullmatch(v) for v in row[2:]):
            shape = "topic,partition,offset" if old else "group,topic,partition,offset"
            raise click.BadParameter(f"line {n} ({lines[n - 1]!r}) is not {shape}", param_hint="--from-file")
        group, topic, partition, offset = row
        plan.setdefault(group, {})[(topic.strip(), int(partition))] = int(offset)
    return plan


def export_reset_plan(plans: dict[str, dict[tuple[str, int], int]], single_group: bool) -> str:
    """Kafka's ``exportOffsetsToCsv``: no header, a ``group,topic,partition,offset`` line per
    partition, without the group column when a single group was named (``isSingleGroupQuery``),
    so that ``read_reset_plan`` of the same group selection reads it back."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for group, plan in plans.items():
        for (topic, partition), offset in sorted(plan.items()):
            writer.writerow([topic, partition, offset] if single_group else [group, topic, partition, offset])
    return out.getvalue()


def _scenario(options: dict, single_group: str | None) -> tuple[str, object]:
    """The one reset scenario and its value, checked as ``checkArgs`` checks them (exactly one).
    ``--by-duration`` becomes the ``--to-datetime`` it means; ``--from-file`` its parsed plan."""
    values = {"--to-earliest": options["to_earliest"] or None, "--to-latest": options["to_latest"] or None,
              "--to-current": options["to_current"] or None}
    for name in _SCENARIOS[3:]:
        values[name] = _one(options[name[2:].replace("-", "_")], name)
    given = [name for name in _SCENARIOS if values[name] is not None]
    if not given:
        raise click.UsageError(f"Option '--reset-offsets' requires one of the following scenarios: "
                               f"{', '.join(_SCENARIOS)}")
    if len(given) > 1:
        raise click.UsageError(f'Option "{given[0]}" can\'t be used with option "{given[1]}"')
    name, value = given[0], values[given[0]]
    if name == "--by-duration":
        return "--to-datetime", int(time.time() * 1000) - parse_duration(value)
    if name == "--from-file":
        with open(value, encoding="utf-8") as f:
            return name, read_reset_plan(f.read(), single_group)
    return name, value


@click.command("reset-offsets")
@click.argument("group_ids", nargs=-1)
@click.option("--all-groups", is_flag=True, help="every group instead of the GROUP_IDs")
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
@click.option("--from-file", type=click.Path(exists=True, dir_okay=False), multiple=True,
              help="the offsets of a CSV plan (as --export prints it), kept within the log")
@click.option("--dry-run", is_flag=True, help="only show the new offsets (the default)")
@click.option("--execute", is_flag=True, help="apply the new offsets")
@click.option("--export", is_flag=True, help="print the new offsets as CSV (for --from-file) instead of a table")
@click.pass_context
def groups_reset_offsets(ctx, group_ids, all_groups, topics, all_topics, dry_run, execute, export, **scenario):
    """Set stopped groups' committed offsets; prints GROUP TOPIC PARTITION NEW-OFFSET.

    Options are checked as Kafka's ``ConsumerGroupCommandOptions.checkArgs``: groups or
    ``--all-groups``, exactly one scenario, and ``--execute`` or ``--dry-run``, not both. As
    ``ConsumerGroupService.resetOffsets``, a group with active members is refused (named on stderr,
    exit status 1) while the others are reset, and ``--from-file`` takes each group's partitions
    from the plan (``--topic``/``--all-topics`` are not needed), a group it lacks getting
    ``No reset plan for group x found``. Every plan is made before any is applied, so an error
    in one (a partition that does not exist) changes nothing."""
    check_selection("reset-offsets", group_ids, all_groups)
    if dry_run and execute:
        raise click.UsageError("Option --reset-offsets only accepts one of --execute and --dry-run")
    named = list(dict.fromkeys(group_ids))
    single = named[0] if len(named) == 1 else None
    name, value = _scenario(scenario, single)
    if name != "--from-file" and not topics and not all_topics:
        raise click.UsageError("One of the reset scopes should be defined: --all-topics, --topic.")
    if name != "--from-file" and topics and all_topics:
        raise click.UsageError('Option "--topic" can\'t be used with option "--all-topics"')
    refused, plans = 0, {}
    with open_admin(ctx) as admin:
        for group_id in chosen_groups(admin, group_ids, all_groups):
            busy = _refusal(admin, group_id)
            if busy is not None:
                refused += 1
                click.echo(f"Error: {busy.name}: {busy.message}", err=True)
                continue
            if name == "--from-file" and group_id not in value:
                click.echo(f"Error: No reset plan for group {group_id} found", err=True)
                continue
            plans[group_id] = _plan(admin, group_id, name, value, topics, named=not all_groups)
        if execute:
            _apply(admin, plans)
    if export:
        click.echo(export_reset_plan(plans, single is not None), nl=False)
    elif any(plans.values()):
        # printOffsetsToReset: Kafka's "%n%-30s %-30s %-10s %-15s" lines
        click.echo()
        for row in [("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")] + [
                (group_id, topic, str(partition), str(offset))
                for group_id, plan in plans.items() for (topic, partition), offset in sorted(plan.items())]:
            click.echo(f"{row[0]:<30} {row[1]:<30} {row[2]:<10} {row[3]:<15}")
    if not execute and not dry_run:      # stderr, as Kafka's checkArgs warns: stdout holds only the plan
        click.echo("WARN: No action will be performed as the --execute option is missing (add --execute to "
                   "apply, or --dry-run to say that only the plan is wanted).", err=True)
    if refused:
        ctx.exit(1)


def _refusal(admin, group_id: str) -> NonEmptyGroupError | None:
    """Why the group's offsets cannot be reset now, if they cannot: it has members (Kafka's
    ``resetOffsets`` resets only an Empty or Dead group)."""
    try:
        desc = admin.describe_consumer_groups([group_id])[group_id].result()
    except RiverlogError:   # a group with no state yet has no members either
        return None
    if not desc.members:
        return None
    return NonEmptyGroupError(f"Assignments can only be reset if the group '{group_id}' is inactive, but the current "
                              f"state is {desc.state}; stop its {len(desc.members)} member(s) first.")


def _apply(admin, plans: dict[str, dict[tuple[str, int], int]]) -> None:
    """Commit every group's new offsets (``alterConsumerGroupOffsets``); a partition the
    coordinator refused fails the command with its error, as ``all().get()`` does in Kafka's tool."""
    from broker.client import ConsumerGroupTopicPartitions, TopicPartition
    requests = [ConsumerGroupTopicPartitions(g, [TopicPartition(t, p, o) for (t, p), o in sorted(plan.items())])
                for g, plan in plans.items() if plan]
    if requests:
        for future in admin.alter_consumer_group_offsets(requests).values():
            failed = next((tp for tp in future.result().topic_partitions if tp.error is not None), None)
            if failed is not None:
                raise failed.error.exception()


def _plan(admin, group_id: str, name: str, value, topics: tuple, named: bool) -> dict[tuple[str, int], int]:
    """Kafka's ``prepareOffsetsToReset`` for one group: only ``--to-offset``, ``--shift-by`` and
    ``--from-file`` go through ``checkOffsetsRange``; ``--to-current`` keeps each committed offset
    as it is. A named group with nothing to reset is an error; under ``--all-groups`` it is skipped."""
    from broker.client import ConsumerGroupTopicPartitions, OffsetSpec
    if name == "--from-file":
        return _in_range(admin, value[group_id])
    committed = {(tp.topic, tp.partition): tp.offset for tp in admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group_id)])[group_id].result().topic_partitions}
    keys = sorted((tp.topic, tp.partition) for tp in selected_partitions(admin, topics)) if topics else sorted(committed)
    if not keys:
        if named:
            raise InvalidRequestError(f"group '{group_id}' has no offsets to reset")
        return {}
    if name == "--to-offset":
        return _in_range(admin, {k: value for k in keys})
    if name == "--shift-by":
        for topic, partition in keys:
            if (topic, partition) not in committed:
                raise InvalidRequestError(f"{topic}:{partition} has no committed offset to shift")
        return _in_range(admin, {k: committed[k] + value for k in keys})
    if name == "--to-earliest" or (name == "--to-datetime" and value < 0):
        # A time before the epoch: every record is at or after it (Kafka's search for the first
        # offset with a timestamp >= it finds the log start); ListOffsets takes no negative time.
        return _listed(admin, keys, OffsetSpec.earliest())
    latest = _listed(admin, keys, OffsetSpec.latest())
    if name == "--to-latest":
        return latest
    if name == "--to-current":
        return {k: committed.get(k, latest[k]) for k in keys}
    at = _listed(admin, keys, OffsetSpec.for_timestamp(value))
    return {k: at[k] if at[k] >= 0 else latest[k] for k in keys}   # getLogTimestampOffsets: none that late -> the end


def _in_range(admin, requested: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """Kafka's ``checkOffsetsRange``: each offset moved into [log start, log end]."""
    from broker.client import OffsetSpec
    if not requested:
        return {}
    earliest, latest = _listed(admin, requested, OffsetSpec.earliest()), _listed(admin, requested, OffsetSpec.latest())
    return {k: min(max(o, earliest[k]), latest[k]) for k, o in requested.items()}


def _listed(admin, keys, spec) -> dict[tuple[str, int], int]:
    """ListOffsets of ``spec`` for each (topic, partition)."""
    from broker.client import TopicPartition
    return {(tp.topic, tp.partition): f.result().offset
            for tp, f in admin.list_offsets({TopicPartition(t, p): spec for t, p in keys}).items()}
