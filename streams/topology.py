"""The topology a builder makes: processor nodes, their stores and topics, cut into sub-topologies
where Kafka Streams cuts them (at repartition topics), and described as Kafka describes them.

Internal topics are named without the application id here; :meth:`Topology.topic` adds it
(``<application.id>-<name>-repartition``, ``<application.id>-<store>-changelog``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from streams.errors import TopologyError
from streams.processor import Processor
from streams.stores import StoreSpec


@dataclass(eq=False)
class Node:
    name: str
    kind: str                                   # "source", "processor" or "sink", as Kafka's description
    op: str                                     # the DSL operation, e.g. "filter", "aggregate"
    factory: Callable[[], Processor]
    parents: list["Node"] = field(default_factory=list)
    children: list["Node"] = field(default_factory=list)
    stores: tuple[StoreSpec, ...] = ()
    topics: tuple[str, ...] = ()                # a source's topics, or a sink's fixed topic
    internal: bool = False                      # its topics are internal (repartition) topics
    args: dict[str, Any] = field(default_factory=dict)   # what a query needs to compile the node to Spark SQL
    key_serde: Any = None                       # serdes of what the node emits (None: not known)
    value_serde: Any = None
    index: int = 0

    def __repr__(self):
        return f"Node({self.name})"


@dataclass
class SubTopology:
    id: int
    nodes: list[Node]                     # in definition order

    @property
    def sources(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == "source"]

    @property
    def sinks(self) -> list[Node]:
        return [n for n in self.nodes if n.kind == "sink"]

    @property
    def stores(self) -> list[StoreSpec]:
        seen: dict[str, StoreSpec] = {}
        for n in self.nodes:
            for s in n.stores:
                seen.setdefault(s.name, s)
        return list(seen.values())

    @property
    def stateful(self) -> bool:
        return bool(self.stores)


class Topology:
    def __init__(self, nodes: list[Node]):
        self.nodes = nodes
        self.by_name = {n.name: n for n in nodes}
        self._check()
        self.subtopologies = self._cut()

    def _check(self) -> None:
        read: dict[str, str] = {}
        for n in self.nodes:
            if n.kind == "source":
                for t in n.topics:
                    if t in read:
                        raise TopologyError(f"topic {t!r} is read by both {read[t]} and {n.name}; "
                                            f"read it once and share the stream")
                    read[t] = n.name
        stores: dict[str, StoreSpec] = {}
        for n in self.nodes:
            for s in n.stores:
                other = stores.setdefault(s.name, s)
                if other is not s and other.kind != s.kind:
                    raise TopologyError(f"store name {s.name!r} is used for two different stores; "
                                        f"name them apart with Materialized.as_")
        if not any(n.kind == "source" for n in self.nodes):
            raise TopologyError("the topology has no source: read a topic with stream(), table() or globalTable()")

    def _cut(self) -> list[SubTopology]:
        """Connected components over parent edges and shared stores, numbered by first node."""
        parent = {n.name: n.name for n in self.nodes}

        def find(x):
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        def union(a, b):
            ra, rb = find(a), find(b)
            if ra != rb:
                parent[max(ra, rb, key=lambda r: self.by_name[r].index)] = min(
                    ra, rb, key=lambda r: self.by_name[r].index)

        owner: dict[str, str] = {}
        for n in self.nodes:
            for p in n.parents:
                union(n.name, p.name)
            for s in n.stores:
                if s.name in owner:
                    union(n.name, owner[s.name])
                owner.setdefault(s.name, n.name)
        groups: dict[str, list[Node]] = {}
        for n in self.nodes:
            groups.setdefault(find(n.name), []).append(n)
        ordered = sorted(groups.values(), key=lambda g: g[0].index)
        return [SubTopology(i, g) for i, g in enumerate(ordered)]

    # ------------------------------------------------------------------ names
    @staticmethod
    def topic(application_id: str, node: Node, name: str) -> str:
        return f"{application_id}-{name}" if node.internal else name

    def source_topics(self, application_id: str, sub: SubTopology) -> list[str]:
        return [self.topic(application_id, n, t) for n in sub.sources for t in n.topics]

    def internal_topics(self, application_id: str) -> dict[str, str]:
        """Every internal topic with its kind ("repartition" or "changelog")."""
        out = {}
        for n in self.nodes:
            if n.internal:
                for t in n.topics:
                    out[f"{application_id}-{t}"] = "repartition"
        for sub in self.subtopologies:
            for s in sub.stores:
                out[changelog_topic(application_id, s.name)] = "changelog"
        return out

    def repartition_partitions(self, application_id: str, topic: str, partitions) -> int | None:
        """Kafka's rule for a repartition topic's partitions: ``Repartitioned``'s number, else the
        most partitions among the writing sub-topology's source topics (``partitions(topic)``
        gives a source's count). None when ``topic`` is not a repartition topic of this topology."""
        for n in self.nodes:
            if n.kind == "sink" and n.internal and f"{application_id}-{n.topics[0]}" == topic:
                if n.args.get("partitions"):
                    return n.args["partitions"]
                sub = next(s for s in self.subtopologies if n in s.nodes)
                return max(partitions(t) for t in self.source_topics(application_id, sub))
        return None

    def enforced_partitions(self, application_id: str, topic: str) -> int | None:
        """The partition count ``Repartitioned.numberOfPartitions`` fixed for repartition ``topic``."""
        for n in self.nodes:
            if n.kind == "sink" and n.internal and f"{application_id}-{n.topics[0]}" == topic:
                return n.args.get("partitions") or None
        return None

    def stores(self) -> dict[str, StoreSpec]:
        return {s.name: s for sub in self.subtopologies for s in sub.stores}

    # ------------------------------------------------------------------ describe
    def describe(self, application_id: str | None = None) -> "TopologyDescription":
        return TopologyDescription(self, application_id)


def changelog_topic(application_id: str, store: str) -> str:
    return f"{application_id}-{store}-changelog"


class TopologyDescription:
    """Kafka's ``TopologyDescription`` text, plus what each sub-topology becomes in Spark and the
    internal topics it reads and writes."""
    def __init__(self, topology: Topology, application_id: str | None, combined: dict[int, str] | None = None):
        self.topology, self.application_id = topology, application_id
        self.combined = combined or {}    # sub-topology id: how its rows are combined before its task

    @property
    def subtopologies(self) -> list[SubTopology]:
        return self.topology.subtopologies

    def __str__(self) -> str:
        t, app = self.topology, self.application_id or "<application.id>"
        lines = ["Topologies:"]
        for sub in t.subtopologies:
            from streams.spark_plan import plan
            p = plan(sub)
            vectorized = any(getattr(v, "is_vectorized", False) for n in p.prefix for v in n.args.values())
            if p.sink is not None:
                how = "one streaming query, all Spark SQL" + (" and vectorised Python (Arrow UDFs)" if vectorized else "")
            else:
                how = ("one streaming query: transformWithState, one task per input partition" if sub.stateful
                       else "one streaming query: mapInArrow, stateless")
                if p.prefix:
                    how += f"; Spark SQL{' and vectorised Python' if vectorized else ''} up to {p.prefix[-1].name}"
                if sub.id in self.combined:
                    how += "; " + self.combined[sub.id]
            if any(n.args.get("global") for n in sub.nodes):
                how = "for global store (will not generate tasks)"
                lines.append(f"   Sub-topology: {sub.id} {how}")
            else:
                lines.append(f"   Sub-topology: {sub.id}  ({how})")
            for n in sub.nodes:
                if n.kind == "source":
                    topics = ", ".join(t.topic(app, n, x) for x in n.topics)
                    lines.append(f"    Source: {n.name} (topics: [{topics}])")
                elif n.kind == "sink":
                    target = t.topic(app, n, n.topics[0]) if n.topics else "<chosen per record>"
                    lines.append(f"    Sink: {n.name} (topic: {target})")
                else:
                    stores = ", ".join(s.name for s in n.stores)
                    lines.append(f"    Processor: {n.name} (stores: [{stores}])")
                if n.children:
                    lines.append(f"      --> {', '.join(c.name for c in n.children)}")
                else:
                    lines.append("      --> none")
                if n.parents:
                    lines.append(f"      <-- {', '.join(p.name for p in n.parents)}")
            for s in sub.stores:
                lines.append(f"    Store: {s.name} ({s.kind}) changelog: {changelog_topic(app, s.name)}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)
