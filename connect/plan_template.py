"""A sink batch's plan, built once and moved onto each later batch.

A sink connector's converters, transforms and error split are the same projections in every
micro-batch while the converters' types and the batch's columns stay the same: only the rows
differ. Building them from Python costs about a thousand py4j calls (0.2–0.3 s a batch, more than
a small batch's write). So the first batch's finished frame is kept as a *template*, and a later
batch gets the template's plan with the first batch's leaf replaced by its own.

Why this is sound. ``foreachBatch`` hands each batch over as a new leaf with the query's output
attributes (the same names, types and expression ids in every batch), so the template's
expressions resolve against the new leaf exactly as against the old one; the move is refused —
and the frame built afresh — unless the new leaf's attributes equal the old one's, the template
reads no other leaf and holds no subquery (nothing in it was computed from the first batch's
rows). The caller keys the template by everything the planning reads besides the batch's
columns (the converters' bound types, flags): a new key builds a new template.

Threading: one instance per query, used from its ``foreachBatch`` thread only.
"""
from __future__ import annotations

import logging
from typing import Callable, Hashable

from pyspark.sql import DataFrame

log = logging.getLogger(__name__)


class PlanTemplate:
    """``frame(key, batch, build)``: ``build(batch)`` the first time (and whenever ``key`` changes);
    afterwards the same plan over ``batch``'s rows, without calling ``build``."""

    def __init__(self):
        self._key: Hashable | None = None
        self._path: list = []      # the template's plan nodes, root first, down to its leaf
        self._leaf = None          # the template's leaf (the batch it was built on)
        self.moves = 0             # batches planned from the template

    def frame(self, key: Hashable | None, batch: DataFrame, build: Callable[[DataFrame], DataFrame]) -> DataFrame:
        leaf = batch._jdf.queryExecution().analyzed()
        if key is not None and key == self._key and self._leaf.output().equals(leaf.output()):
            try:
                out = _frame(batch, _moved(self._path, leaf, batch.sparkSession._jvm))
            except Exception:  # noqa: BLE001 - not expected: Spark refused the moved plan, so plan afresh
                log.warning("a batch's plan could not be moved from the last batch's; planning it afresh",
                            exc_info=True)
            else:
                self.moves += 1
                return out
        out = build(batch)
        self.clear()
        if key is not None:
            path = _chain(out._jdf.queryExecution().analyzed(), leaf)
            if path is not None:
                self._key, self._path, self._leaf = key, path, leaf
        return out

    def clear(self) -> None:
        self._key, self._path, self._leaf = None, [], None


def _frame(batch: DataFrame, plan) -> DataFrame:
    """A DataFrame of the moved ``plan`` in ``batch``'s session, marked analysed first: every node
    was analysed and checked in the template, and the leaf's attributes are the template leaf's, so
    Spark's analyser (which returns a plan so marked at once) would find nothing to do but walk the
    tree again (5–10 ms a small batch)."""
    spark = batch.sparkSession
    plan.setAnalyzed()
    return DataFrame(spark._jvm.org.apache.spark.sql.classic.Dataset.ofRows(spark._jsparkSession, plan), spark)


def _chain(plan, leaf) -> list | None:
    """The nodes from ``plan`` down to ``leaf`` when the plan is one chain ending in it (every node
    above has one child) and holds no subquery; None otherwise (such a plan is not a template)."""
    if not plan.subqueriesAll().isEmpty():
        return None
    path, node = [], plan
    while not node.fastEquals(leaf):
        children = node.children()
        if children.size() != 1:
            return None
        path.append(node)
        node = children.apply(0)
    return path


def _moved(path: list, leaf, jvm):
    """The template's nodes rebuilt bottom-up over ``leaf``."""
    out = leaf
    for parent in reversed(path):
        out = parent.withNewChildren(jvm.PythonUtils.toSeq([out]))
    return out
