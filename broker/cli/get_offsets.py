"""``riverlog offsets``: Kafka's ``kafka-get-offsets`` (``GetOffsetShell``).

    riverlog offsets orders --time 2026-11-01T00:00:00         # one topic, by name
    riverlog offsets --topic 'orders|audit.*' --partitions 0,1  # a regex and partition ids
    riverlog offsets --topic-partitions 'orders:0-3,:5-' --time earliest
    riverlog offsets --exclude-internal-topics                  # every topic

Prints ``TOPIC:PARTITION:OFFSET`` per partition, by topic then partition. Which partitions is
:mod:`broker.cli.topic_partition_filter`; ``broker.cli`` adds the command to the ``riverlog`` group.
"""
from __future__ import annotations

import click

from broker.cli.common import internal_topics, open_admin, partitions_of
from broker.cli.params import NAMED_TIMES, PARTITION, TIMESTAMP
from broker.cli.topic_partition_filter import (TopicPartitionFilterError, select, topic_and_partitions,
                                               topic_partition_rules)
from broker.errors import RiverlogError


def offset_rules(topic_regex, partition_ids, topic_partitions):
    """The filter rules of ``--topic``/``--partitions`` or ``--topic-partitions``, refusing both as
    ``GetOffsetShell.fetchOffsets`` does."""
    try:
        if topic_partitions is not None:
            if topic_regex is not None or partition_ids is not None:
                raise click.UsageError("--topic-partitions cannot be used with --topic or --partitions")
            return topic_partition_rules(topic_partitions)
        return topic_and_partitions(topic_regex, partition_ids)
    except TopicPartitionFilterError as e:
        raise click.UsageError(str(e)) from None


@click.command()
@click.argument("topic", required=False)
@click.option("--time", "-t", "when", type=TIMESTAMP, default="latest", show_default=True,
              help="earliest, latest, max-timestamp, earliest-local, latest-tiered, ms since the epoch, "
                   "or ISO-8601 (UTC if no zone)")
@click.option("--partition", "-p", type=PARTITION, default=None, help="with TOPIC: only this partition")
@click.option("--topic", "topic_regex", default=None,
              help="instead of TOPIC: a regex of topic names (the whole name must match)")
@click.option("--partitions", "partition_ids", default=None, help="with --topic: comma-separated partition ids")
@click.option("--topic-partitions", default=None,
              help="comma-separated TOPIC_REGEX:PARTITIONS rules, partitions N, N-M (M excluded), N-, -M or none "
                   "(all), e.g. orders:0-3,audit,:5-")
@click.option("--exclude-internal-topics", is_flag=True, help="leave out __consumer_offsets and __transaction_state")
@click.pass_context
def offsets(ctx, topic, when, partition, topic_regex, partition_ids, topic_partitions, exclude_internal_topics):
    """Print TOPIC:PARTITION:OFFSET for each partition at a point in time.

    As Kafka's ``GetOffsetShell.fetchOffsets``, a partition with no such offset (no record at or
    after the time) is left out, and one that fails is skipped with its error on stderr; filters
    that match no partition fail. TOPIC names one topic (it must exist); without it, every topic
    that ``--topic``/``--partitions`` or ``--topic-partitions`` allows, internal ones too unless
    ``--exclude-internal-topics``. earliest-local is the log start (every segment is local);
    latest-tiered has no offset, as Kafka answers for a log without remote storage."""
    from broker.client import OffsetSpec, TopicPartition
    if topic is not None and (topic_regex or partition_ids or topic_partitions):
        raise click.UsageError("give the topic as TOPIC (with --partition) or as --topic/--partitions/"
                               "--topic-partitions, not both")
    if partition is not None and topic is None:
        raise click.UsageError("--partition goes with TOPIC; use --partitions with --topic")
    rules = None if topic is not None else offset_rules(topic_regex, partition_ids, topic_partitions)
    spec = OffsetSpec(NAMED_TIMES["earliest"] if when == NAMED_TIMES["earliest-local"] else when)
    with open_admin(ctx) as admin:
        if rules is None:
            wanted = [(topic, p) for p in (partitions_of(admin, topic) if partition is None else [partition])]
        else:
            every = _every_partition(admin)
            wanted = select(rules, every, internal_topics(admin, every) if exclude_internal_topics else set(),
                            exclude_internal_topics)
            if not wanted:
                raise click.ClickException("Could not match any topic-partitions with the specified filters")
        if when == NAMED_TIMES["latest-tiered"]:
            return
        futures = admin.list_offsets({TopicPartition(t, p): spec for t, p in wanted})
        # GetOffsetShell's order: by TopicPartition.toString() (so orders-10 comes before orders-2)
        for tp, future in sorted(futures.items(), key=lambda kv: f"{kv[0].topic}-{kv[0].partition}"):
            try:
                offset = future.result().offset
            except RiverlogError as e:
                click.echo(f"Skip getting offsets for topic-partition {tp.topic}-{tp.partition} due to error: "
                           f"{e.name}: {e.message}", err=True)
                continue
            if offset >= 0:
                click.echo(f"{tp.topic}:{tp.partition}:{offset}")


def _every_partition(admin) -> dict[str, list[int]]:
    return {name: sorted(t.partitions) for name, t in admin.list_topics().topics.items() if t.error is None}
