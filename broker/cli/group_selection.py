"""Which groups and partitions a ``riverlog groups`` command acts on: group ids or
``--all-groups`` (Kafka's ``--group``/``--all-groups``), and ``--topic TOPIC[:P1,P2]``."""
from __future__ import annotations

import time

import click

from broker.cli.common import partitions_of


def check_selection(command: str, group_ids: tuple, all_groups: bool) -> None:
    """Kafka's ``checkArgs``: describe, delete and reset-offsets need groups or ``--all-groups``,
    and not both (``checkInvalidArgs(groupOpt, allGroupsOpt)``)."""
    if group_ids and all_groups:
        raise click.UsageError('Option "GROUP_ID" can\'t be used with option "--all-groups"')
    if not group_ids and not all_groups:
        raise click.UsageError(f"Option {command} takes one of these options: --all-groups, GROUP_ID")


def chosen_groups(admin, group_ids: tuple, all_groups: bool) -> list[str]:
    """The groups named, each once, or with ``--all-groups`` every group (``listConsumerGroups``)."""
    if all_groups:
        return [g.group_id for g in listed_groups(admin)]
    return list(dict.fromkeys(group_ids))


LIST_TIMEOUT_S = 60.0   # Kafka's admin default.api.timeout.ms


def listed_groups(admin, timeout_s: float = LIST_TIMEOUT_S, **filters) -> list:
    """Every group (``list_consumer_groups(**filters)``), or the error of a broker that could not
    list its groups, raised: as Kafka's tool (``listConsumerGroups(...).all()``), a listing is
    never shown with one broker's groups missing. A retriable error (a coordinator still loading
    its groups) is asked again until ``timeout_s``, as Kafka's admin client retries it."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = admin.list_consumer_groups(**filters).result()
        if not result.errors:
            return result.valid
        error = result.errors[0]
        if not getattr(error, "retriable", False) or time.monotonic() >= deadline:
            raise error
        time.sleep(0.1)   # a retry's backoff (retry.backoff.ms)


def selected_partitions(admin, topics: tuple[str, ...]) -> list:
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
