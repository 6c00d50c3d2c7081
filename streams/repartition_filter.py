"""Which repartitions drop null keys (KIP-962), decided once the whole topology is known.

Every repartition (``repartition()``, and the automatic ones before a grouping, a join or
``toTable``) starts with a filter, as Kafka's ``KStreamImpl.createRepartitionedSource`` gives it
one that passes everything. At build time, Kafka's ``InternalStreamsBuilder.rewriteRepartitionNodes``
(with ``NodesWithRelaxedNullKeyJoinDownstream``) turns the filter into ``key != null`` unless a
join that accepts null keys is reachable downstream: a left or outer stream–stream join, or a left
stream–table or stream–globalTable join (the ``NULL_KEY_RELAXED_JOIN`` label; the DSL marks such a
node with ``args["null_key_relaxed"]``). So a null key written to a repartition topic reaches the
left/outer join's joiner, and is dropped before everything else (aggregations, inner joins, sinks).

The filter's predicate is kept as SQL in the node's ``args`` so the Spark plan compiles the same
rule the interpreter runs.
"""
from __future__ import annotations

from streams.functions import Fn

KEEP_ALL, DROP_NULL_KEYS = "TRUE", "key IS NOT NULL"


def filter_fn(drop_null_keys: bool) -> Fn:
    return Fn(DROP_NULL_KEYS if drop_null_keys else KEEP_ALL, "repartition filter", (2,))


def relaxed_downstream(nodes) -> set[str]:
    """Names of the nodes below which a null-key-relaxed join is reachable. A repartition sink's
    child is the source that reads its topic back (``args["pair"]``), as in Kafka's graph."""
    by_name = {n.name: n for n in nodes}

    def children(n):
        kids = list(n.children)
        if n.kind == "sink" and n.args.get("pair") in by_name:
            kids.append(by_name[n.args["pair"]])
        return kids

    relaxed: dict[str, bool] = {}
    for root in nodes:                       # iterative post-order: topologies may be deep
        stack = [(root, False)]
        while stack:
            n, expanded = stack.pop()
            if n.name in relaxed:
                continue
            kids = children(n)
            if not expanded:
                stack.append((n, True))
                stack.extend((c, False) for c in kids if c.name not in relaxed)
                continue
            relaxed[n.name] = any(c.args.get("null_key_relaxed") or relaxed.get(c.name, False) for c in kids)
    return {name for name, r in relaxed.items() if r}


def rewrite_repartition_filters(nodes) -> None:
    """Set every repartition filter to drop null keys unless a relaxed join is downstream.
    Idempotent: building again after adding more operations decides afresh."""
    from streams.stateless import Filter
    keep = relaxed_downstream(nodes)
    for n in nodes:
        if n.args.get("repartition_filter"):
            f = filter_fn(n.name not in keep)
            n.args["predicate"] = f
            n.factory = lambda f=f: Filter(f)
