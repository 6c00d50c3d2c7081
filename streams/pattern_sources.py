"""Pattern sources (``StreamsBuilder.stream(re.compile(...))``, Kafka's ``stream(Pattern)``): a
source reading every topic whose whole name matches, topics that appear later included. Kafka's
rules (``InternalTopologyBuilder``): a pattern may not match a topic another source names, nor a
named topic a pattern; a topic two patterns match is refused when it is first seen."""
from __future__ import annotations

import re

from streams.errors import TopologyError


def pattern_of(node) -> re.Pattern | None:
    return node.args.get("pattern") if node.kind == "source" else None


def check_new_source(nodes, topics, pattern: re.Pattern | None) -> None:
    """Kafka's ``addSource(Pattern)`` and ``validateTopicNotAlreadyRegistered`` texts."""
    named = [t for n in nodes if n.kind == "source" and not n.internal for t in n.topics]
    patterns = [pattern_of(n) for n in nodes if pattern_of(n) is not None]
    if pattern is not None:
        for t in named:
            if pattern.fullmatch(t):
                raise TopologyError(f"Pattern {pattern.pattern} will match a topic that has already been "
                                    f"registered by another source.")
    for t in topics:
        for p in patterns:
            if p.fullmatch(t):
                raise TopologyError(f"Topic {t} matches a Pattern already registered by another source.")


def match(topology, topic: str):
    """The pattern source that reads ``topic`` (remembered in ``topology.matched``), or None."""
    node = topology.matched.get(topic)
    if node is not None:
        return node
    for n in topology.nodes:
        p = pattern_of(n)
        if p is None or not p.fullmatch(topic):
            continue
        if node is not None:
            raise TopologyError(f"Topic {topic} is already matched for another regex pattern "
                                f"{pattern_of(node).pattern} and hence cannot be matched to this regex pattern "
                                f"{p.pattern} any more.")
        node = n
    if node is not None:
        topology.matched[topic] = node
    return node


class SourcesByTopic(dict):
    """A task's source processor per topic; a topic first seen after the task was built finds its
    pattern source's processor."""
    def __init__(self, topology, procs: dict):
        super().__init__()
        self._topology, self._procs = topology, procs

    def __missing__(self, topic: str):
        node = match(self._topology, topic)
        if node is None or node.name not in self._procs:
            raise KeyError(topic)
        self[topic] = self._procs[node.name]
        return self[topic]


def node_topics(topology, node) -> list[str]:
    """The topics ``node`` reads: its named ones, or those its pattern has matched so far."""
    return list(node.topics) + sorted(t for t, n in topology.matched.items() if n is node)


def subscription(topology, app: str, sub) -> str | None:
    """The ``subscribePattern`` of a sub-topology with a pattern source: its patterns and its named
    topics, each anchored (the riverlog source matches anywhere in a name, as Spark's), so topics
    created later are read too. None when it has no pattern source."""
    from streams.topology import Topology
    patterns = [pattern_of(n).pattern for n in sub.sources if pattern_of(n) is not None]
    if not patterns:
        return None
    named = [re.escape(Topology.topic(app, n, t)) for n in sub.sources for t in n.topics]
    return "|".join(f"^(?:{p})$" for p in patterns + named)


def match_existing(topology, topics) -> None:
    """Match the cluster's topics at start (Kafka's first metadata refresh): a topic two patterns
    match fails here. The broker's own (``__``) topics are never matched (Kafka's consumer excludes
    internal topics); the application's are, as in Kafka: keep the pattern off them."""
    for t in sorted(topics):
        if not t.startswith("__"):
            match(topology, t)
