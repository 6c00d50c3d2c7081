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
    partition_time: bool = False          # a source's timestamp extractor reads the partition time

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
        """A store, or a partition time its extractor reads (:mod:`streams.partition_time`), kept
        from one batch to the next in the task's state and changelog."""
        return bool(self.stores) or self.partition_time


class Topology:
    def __init__(self, nodes: list[Node]):
        self.nodes = nodes
        self.by_name = {n.name: n for n in nodes}
        self.matched: dict[str, Node] = {}      # topic -> the pattern source reading it (streams.pattern_sources)
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
        # InternalTopologyBuilder.addStateStore: one store per name. Nodes that share a store
        # share its StoreSpec; two specs of one name would be two stores in one (their updates
        # and changelogs mixed), so a second is refused, as Kafka refuses a second store factory.
        stores: dict[str, StoreSpec] = {}
        for n in self.nodes:
            for s in n.stores:
                other = stores.setdefault(s.name, s)
                if other is not s:
                    raise TopologyError(f"A different StateStore has already been added with the name {s.name}: "
                                        f"name the stores apart with Materialized.as_")
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
        from streams.partition_time import reads_partition_time
        return [SubTopology(i, g, reads_partition_time(g)) for i, g in enumerate(ordered)]

    # ------------------------------------------------------------------ names
    @staticmethod
    def topic(application_id: str, node: Node, name: str) -> str:
        return f"{application_id}-{name}" if node.internal else name

    def source_topics(self, application_id: str, sub: SubTopology) -> list[str]:
        matched = [(n, t) for t, n in sorted(self.matched.items()) if n in sub.nodes]
        return [self.topic(application_id, n, t) for n in sub.sources for t in n.topics] + [t for _, t in matched]

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


def _java_hash(text: str) -> int:
    """Java's ``String.hashCode`` (over UTF-16 code units), as an unsigned 32-bit int."""
    data, h = text.encode("utf-16-be"), 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h


def describe_order(names: list[str]) -> list[str]:
    """The order a ``java.util.HashMap`` of these names (put in this order) iterates them: by
    bucket, ``(hash ^ hash >>> 16) & (capacity - 1)``, the capacity doubling from 16 past 3/4 full."""
    capacity = 16
    while len(names) > capacity * 3 // 4:
        capacity *= 2
    buckets: dict[int, list[str]] = {}
    for name in names:
        h = _java_hash(name)
        buckets.setdefault((h ^ (h >> 16)) & (capacity - 1), []).append(name)
    return [name for b in sorted(buckets) for name in buckets[b]]


class _SizeOrderedSet:
    """Java's ``TreeSet`` (a red-black tree, as ``TreeMap`` balances it) ordered by subtree size
    descending, then name, with the sizes read when a node is added: Kafka keeps a node's
    neighbours in one while the sizes still grow, so the order depends on when each was added."""
    __slots__ = ("root", "sizes")

    class _Entry:
        __slots__ = ("node", "left", "right", "parent", "red")

        def __init__(self, node, parent):
            self.node, self.parent, self.left, self.right, self.red = node, parent, None, None, False

    def __init__(self, sizes: dict[int, int]):
        self.root, self.sizes = None, sizes

    def _cmp(self, a: Node, b: Node) -> int:
        if a is b:
            return 0
        sa, sb = self.sizes[id(a)], self.sizes[id(b)]
        if sa != sb:
            return sb - sa
        return (a.name > b.name) - (a.name < b.name)

    def add(self, node: Node) -> None:
        t = self.root
        if t is None:
            self.root = self._Entry(node, None)
            return
        while True:
            parent, cmp = t, self._cmp(node, t.node)
            if cmp == 0:
                return
            t = t.left if cmp < 0 else t.right
            if t is None:
                break
        e = self._Entry(node, parent)
        if cmp < 0:
            parent.left = e
        else:
            parent.right = e
        self._fix(e)

    @staticmethod
    def _red(e) -> bool:
        return e is not None and e.red

    def _rotate(self, p, left: bool) -> None:
        child = p.right if left else p.left
        inner = child.left if left else child.right
        if left:
            p.right = inner
        else:
            p.left = inner
        if inner is not None:
            inner.parent = p
        child.parent = p.parent
        if p.parent is None:
            self.root = child
        elif p.parent.left is p:
            p.parent.left = child
        else:
            p.parent.right = child
        if left:
            child.left = p
        else:
            child.right = p
        p.parent = child

    def _fix(self, x) -> None:
        x.red = True
        while x is not None and x is not self.root and x.parent.red:
            parent, grand = x.parent, x.parent.parent
            on_left = parent is (grand.left if grand else None)
            uncle = (grand.right if on_left else grand.left) if grand else None
            if self._red(uncle):
                parent.red, uncle.red, grand.red = False, False, True
                x = grand
            else:
                if x is (parent.right if on_left else parent.left):
                    x = parent
                    self._rotate(x, left=on_left)
                x.parent.red = False
                if x.parent.parent is not None:
                    x.parent.parent.red = True
                    self._rotate(x.parent.parent, left=not on_left)
        self.root.red = False

    def __iter__(self):
        stack, e = [], self.root
        while stack or e is not None:
            while e is not None:
                stack.append(e)
                e = e.left
            e = stack.pop()
            yield e.node
            e = e.right


def _kafka_neighbours(topology: "Topology"):
    """Replays Kafka's ``describeSubtopology``: each node, in ``describe_order``, is joined to its
    parents (added to the node's and the parent's neighbour sets), and the parent's size and its
    ancestors' grow by the node's. Returns the final sizes and each node's ordered neighbours."""
    sizes: dict[int, int] = {}
    preds: dict[int, _SizeOrderedSet] = {}
    succs: dict[int, _SizeOrderedSet] = {}

    def grow(node: Node, delta: int) -> None:
        sizes[id(node)] += delta
        for p in preds[id(node)]:
            grow(p, delta)

    for sub in topology.subtopologies:
        by_name = {n.name: n for n in sub.nodes}
        for n in sub.nodes:
            sizes[id(n)], preds[id(n)], succs[id(n)] = 1, _SizeOrderedSet(sizes), _SizeOrderedSet(sizes)
        for name in describe_order(list(by_name)):
            node = by_name[name]
            for parent in node.parents:
                if parent.name not in by_name:
                    continue
                preds[id(node)].add(parent)
                succs[id(parent)].add(node)
                grow(parent, sizes[id(node)])
    return sizes, {k: list(v) for k, v in preds.items()}, {k: list(v) for k, v in succs.items()}


def changelog_topic(application_id: str, store: str) -> str:
    return f"{application_id}-{store}-changelog"


class TopologyDescription:
    """Kafka's ``TopologyDescription`` text, plus what each sub-topology becomes in Spark and the
    internal topics it reads and writes."""
    def __init__(self, topology: Topology, application_id: str | None, combined: dict[int, str] | None = None,
                 decode_in_spark: bool = True):
        self.topology, self.application_id = topology, application_id
        self.combined = combined or {}    # sub-topology id: how its rows are combined before its task
        self.decode_in_spark = decode_in_spark    # False: sources decode in Python, no SQL prefix

    @property
    def subtopologies(self) -> list[SubTopology]:
        return self.topology.subtopologies

    def kafka_text(self) -> str:
        """Exactly Kafka's ``TopologyDescription.toString()``. Kafka orders a sub-topology's nodes
        by the size of their subtree, then name; a node's neighbours sit in sets sorted by the
        sizes they had when the edge was made, in the order Kafka's ``HashMap`` of names visits
        the nodes (``describe_order``): replayed here so the text is the same, character for
        character. Internal topics print bare; a blank line follows each sub-topology."""
        sizes, preds, succs = _kafka_neighbours(self.topology)

        def names(nodes) -> str:
            return ", ".join(n.name for n in nodes) or "none"

        def node_text(n: Node) -> str:
            if n.kind == "source":
                pattern = n.args.get("pattern")    # Kafka prints Pattern.toString(), unbracketed
                topics = pattern.pattern if pattern is not None else f"[{', '.join(n.topics)}]"
                return f"Source: {n.name} (topics: {topics})\n      --> {names(succs[id(n)])}"
            if n.kind == "sink":
                chooser = getattr(n.args.get("extractor"), "fn", None)
                target = f"topic: {n.topics[0]}" if n.topics else \
                    f"extractor class: {getattr(chooser, '__qualname__', type(chooser).__name__)}"
                return f"Sink: {n.name} ({target})\n      <-- {names(preds[id(n)])}"
            return (f"Processor: {n.name} (stores: [{', '.join(s.name for s in n.stores)}])\n"
                    f"      --> {names(succs[id(n)])}\n      <-- {names(preds[id(n)])}")

        out = "Topologies:\n "
        for sub in self.topology.subtopologies:
            if any(n.args.get("global") for n in sub.nodes):
                out += f"  Sub-topology: {sub.id} for global store (will not generate tasks)\n"
                out += "".join(f"    {node_text(n)}\n" for n in sub.nodes)
            else:
                ordered = sorted(sub.nodes, key=lambda n: (-sizes[id(n)], n.name))
                out += f"  Sub-topology: {sub.id}\n" + "".join(f"    {node_text(n)}\n" for n in ordered)
                out += "\n"
        return out

    def spark_text(self) -> str:
        """How each sub-topology runs on Spark, and the internal topics and stores it uses."""
        t, app = self.topology, self.application_id or "<application.id>"
        lines = [f"Spark (application.id {app}):"]
        for sub in t.subtopologies:
            from streams.spark_plan import plan
            if any(n.args.get("global") for n in sub.nodes):
                lines.append(f"  Sub-topology {sub.id}: read into the global store by every task")
                continue
            p = plan(sub, self.decode_in_spark)
            vectorized = any(getattr(v, "is_vectorized", False) for n in p.prefix for v in n.args.values())
            if p.sink is not None:
                how = "one streaming query, all Spark SQL" + (" and vectorised Python (Arrow UDFs)" if vectorized else "")
            else:
                how = ("one streaming query: transformWithState, one task per input partition" if sub.stateful
                       else "one streaming query: mapInArrow, stateless")
                if sub.stateful and not sub.stores:
                    how += " (no store: it keeps the partition time its timestamp extractor reads)"
                if p.prefix:
                    how += f"; Spark SQL{' and vectorised Python' if vectorized else ''} up to {p.prefix[-1].name}"
                if sub.id in self.combined:
                    how += "; " + self.combined[sub.id]
            lines.append(f"  Sub-topology {sub.id}: {how}")
            reads = [t.topic(app, n, x) for n in sub.nodes if n.kind == "source" for x in n.topics]
            writes = [t.topic(app, n, n.topics[0]) for n in sub.nodes if n.kind == "sink" and n.topics]
            lines.append(f"    reads [{', '.join(reads)}]; writes [{', '.join(writes)}]")
            for st in sub.stores:
                lines.append(f"    Store: {st.name} ({st.kind}) changelog: {changelog_topic(app, st.name)}")
        return "\n".join(lines)

    def __str__(self) -> str:
        """Kafka's text, then how Spark runs it."""
        return self.kafka_text() + "\n" + self.spark_text()

    def __repr__(self) -> str:
        return str(self)
