"""Which topic-partitions ``riverlog offsets`` asks about: Kafka's ``GetOffsetShell`` filters.

    rules = topic_partition_rules("orders:0-3,audit.*,:5-")   # --topic-partitions
    rules = topic_and_partitions("orders|audit.*", "0,2")      # --topic / --partitions
    allowed(rules, "orders", 2)                                # True

A rule is a topic regex (the whole name must match; omitted: every topic) and a partition
pattern: ``N`` (that one), ``N-M`` (N up to M, M excluded), ``N-`` (N and up), ``-M`` (below M) or
omitted (all). A topic regex is taken as Kafka's ``IncludeList`` takes it: trimmed, commas read as
``|``, spaces and surrounding quotes dropped. Pure.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["TopicPartitionFilterError", "allowed", "include_list", "select", "topic_allowed",
           "topic_and_partitions", "topic_partition_rules"]

_RULE = re.compile(r"([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?")
_INT32_MAX = 2**31 - 1


class TopicPartitionFilterError(ValueError):
    """A pattern that is not one, with Kafka's message."""


@dataclass(frozen=True)
class Rule:
    topic: re.Pattern
    low: int = 0                 # first partition allowed
    high: int = _INT32_MAX       # first partition no longer allowed
    only: frozenset | None = None

    def topic_allowed(self, topic: str) -> bool:
        return self.topic.fullmatch(topic) is not None

    def allows(self, topic: str, partition: int) -> bool:
        if not self.topic_allowed(topic):
            return False
        if self.only is not None:
            return not self.only or partition in self.only
        return self.low <= partition < self.high


def include_list(raw: str) -> re.Pattern:
    """Kafka's ``IncludeList`` regex of a ``--topic`` value (matched against the whole name)."""
    text = re.sub(r"[\"']+$", "", re.sub(r"^[\"']+", "", raw.strip().replace(",", "|").replace(" ", "")))
    try:
        return re.compile(text)
    except re.error:
        raise TopicPartitionFilterError(f"{text} is an invalid regex.") from None


def topic_partition_rules(spec: str) -> list[Rule]:
    """``--topic-partitions``: comma-separated rules (``GetOffsetShell.parseRuleSpec``)."""
    rules = []
    parts = spec.split(",")
    while len(parts) > 1 and parts[-1] == "":      # Java's String.split drops trailing empty strings
        parts.pop()
    for part in parts:
        m = _RULE.fullmatch(part)
        if m is None:
            raise TopicPartitionFilterError(f"Invalid rule specification: {part}")
        topic, exact, low, high = (g or None for g in m.groups())
        regex = include_list(topic) if topic else re.compile(".*")
        if exact is not None:
            rules.append(Rule(regex, int(exact), int(exact) + 1))
        else:
            rules.append(Rule(regex, int(low) if low else 0, int(high) if high else _INT32_MAX))
    return rules


def topic_and_partitions(topic: str | None, partitions: str | None) -> list[Rule]:
    """``--topic`` (a regex, default every topic) with ``--partitions`` (ids, default all)."""
    ids: frozenset = frozenset()
    if partitions:
        try:
            ids = frozenset(int(p) for p in partitions.split(","))
        except ValueError:
            raise TopicPartitionFilterError("--partitions expects a comma separated list of numeric partition ids, "
                                            f"but received: {partitions}") from None
    return [Rule(include_list(topic if topic is not None else ".*"), only=ids)]


def topic_allowed(rules: list[Rule], topic: str) -> bool:
    return any(r.topic_allowed(topic) for r in rules)


def allowed(rules: list[Rule], topic: str, partition: int) -> bool:
    return any(r.allows(topic, partition) for r in rules)


def select(rules: list[Rule], partitions: dict[str, list[int]], internal: set[str],
           exclude_internal: bool) -> list[tuple[str, int]]:
    """The (topic, partition)s of ``partitions`` (every topic's partition numbers) the rules allow,
    by topic then partition; internal topics are in unless ``exclude_internal`` (``--exclude-internal-topics``)."""
    return [(topic, p) for topic in sorted(partitions)
            if topic_allowed(rules, topic) and not (exclude_internal and topic in internal)
            for p in sorted(partitions[topic]) if allowed(rules, topic, p)]
