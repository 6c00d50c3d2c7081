"""Which windows ``suppress(untilWindowCloses)`` waits for: Kafka's
``GraphGraceSearchUtil.findAndVerifyWindowGrace``.

A table made by a windowed aggregation (or a filter, mapValues, join or suppress of one) knows its
windows; its node records them under ``args["window_grace"]`` (:class:`streams.ktable.KTable`).
Any other table is searched as Kafka searches its graph: up every parent — stateless and stateful
steps alike, ``toStream().toTable()``, and from a repartition topic's source to the sink that
writes it — until a node with windows. Every path must reach one (the first that reaches a source
instead is refused, naming it from Kafka's ``root``); the windows with the largest close grace
win, so a merge of differently windowed streams waits the longest grace."""
from __future__ import annotations

from streams.errors import TopologyError
from streams.topology import Node


def find_window_grace(node: Node, nodes: list[Node]):
    """The windows whose ``closeGraceMs()`` the suppression after ``node`` waits."""
    writers = {n.args["pair"]: n for n in nodes if n.kind == "sink" and n.args.get("pair")}
    return _search(node, "", writers, {})


def _search(node: Node, chain: str, writers: dict, found: dict):
    """``found``: each node already searched (a diamond's shared ancestors are searched once)."""
    windows = node.args.get("window_grace") or found.get(node.name)
    if windows is not None:
        return windows
    chain = node.name if not chain else f"{node.name}->{chain}"
    parents = node.parents or ([writers[node.name]] if node.name in writers else [])
    if not parents:
        raise TopologyError(f"Window close time is only defined for windowed computations. Got [root->{chain}].",
                            argument="suppressed")
    windows = max((_search(p, chain, writers, found) for p in parents), key=lambda w: w.closeGraceMs())
    found[node.name] = windows
    return windows
