"""``KTable``: a changelog stream read as a table (the latest value per key). Its records carry
``Change(new, old)``; ``toStream()`` turns them back into a record stream."""
from __future__ import annotations

from streams.errors import TopologyError
from streams.functions import Fn
from streams.parameters import Grouped, Materialized, split_materialized


def materialize_source(node) -> bool:
    """Kafka's ``KTableSource.materialize()``: an unnamed ``toTable`` keeps no store until a
    downstream step reads its values (a join's value getter) or needs its old values
    (``enableSendingOldValues(true)``: ``groupBy``, ``suppress``, an outer table join); then it
    gets the store whose name ``toTable`` drew, and counts as materialized from then on. True
    when the node now has a store it did not have. An unnamed ``builder.table`` keeps its store
    either way, but from then on counts as materialized: a ``filter`` defined after the join gets
    its old values (Kafka's ``KTableSource.materialized()``)."""
    spec = node.args.get("unmaterialized_store")
    if spec is None or node.stores:
        if node.op == "table-source":
            node.args["queryable"] = True
        return False
    node.stores = (spec,)
    node.args["opts"]["store"] = spec.name
    node.args["queryable"] = True
    return True


def _named(named):
    from streams.kstream import _named as n
    return n(named)


class KTable:
    def __init__(self, builder, node, key_serde=None, value_serde=None, store_name: str | None = None,
                 windowed=None):
        self._b, self._node = builder, node
        self.key_serde, self.value_serde = key_serde, value_serde
        self._store_name = store_name
        self._windowed = windowed   # the windows of a windowed aggregation's result, else None
        if windowed is not None:    # what a suppression further down finds (streams.grace_search)
            node.args.setdefault("window_grace", windowed)

    def queryableStoreName(self) -> str | None:
        """The store's name when ``Materialized.as_`` gave it, else None, as Kafka's
        ``MaterializedInternal.queryableStoreName``: a generated name shifts with the topology."""
        return self._store_name if self._store_name in self._b.given_stores else None

    def _then(self, prefix, op, factory, named, materialized, value_serde=..., args=None) -> "KTable":
        spec = None
        if materialized is not None and materialized.store_name is None:
            # Kafka draws a store name for an anonymous Materialized but keeps no store: the
            # result is read through its parent's, as a table that was never materialized
            self._b.next_name(f"{prefix}STATE-STORE-")
        elif materialized is not None:
            spec = self._b.store(materialized, "keyValue", f"{prefix}STATE-STORE-", key_serde=self.key_serde,
                                 value_serde=self.value_serde if value_serde is ... else value_serde)
        name = self._b.name(_named(named), prefix)
        opts: dict = {}
        node = self._b.add(name, "processor", op,
                           lambda: factory(spec.name if spec else None, opts.get("send_old_values", False)),
                           [self._node], (spec,) if spec else (), args={**(args or {}), "opts": opts},
                           key_serde=self.key_serde, value_serde=self.value_serde if value_serde is ... else value_serde)
        return KTable(self._b, node, self.key_serde, node.value_serde, spec.name if spec else None, self._windowed)

    def filter(self, predicate, named=None, materialized: Materialized | None = None) -> "KTable":
        return self._filter("filter", predicate, named, materialized)

    def filterNot(self, predicate, named=None, materialized: Materialized | None = None) -> "KTable":
        return self._filter("filterNot", predicate, named, materialized)

    def _filter(self, op, predicate, named, materialized) -> "KTable":
        """Kafka's ``KTableFilter`` asks its parent for old values without forcing a store
        (``enableSendingOldValues(false)``); where the parent has them, a row failing both now and
        before is dropped instead of becoming one more tombstone."""
        from streams.table import KTableFilter
        named, materialized = split_materialized(named, materialized)
        f = Fn(predicate, f"{op} predicate", (2,))
        test = _predicate(f)
        parent_old, versioned = self._try_old_values(), self._versioned_upstream()
        return self._then("KTABLE-FILTER-", op,
                          lambda s, old: KTableFilter(test, op == "filterNot", s, send_old_values=old or parent_old,
                                                      versioned_upstream=versioned),
                          named, materialized, args={"predicate": f})

    def _versioned_upstream(self) -> bool:
        """Kafka's ``InternalStreamsBuilder.isVersionedUpstream``: the nearest store up the chain
        is a versioned table's."""
        node = self._node
        while node.op in ("filter", "filterNot", "mapValues") and not node.stores and node.parents:
            node = node.parents[0]
        return bool(node.args.get("versioned"))

    def mapValues(self, mapper, named=None, materialized: Materialized | None = None) -> "KTable":
        named, materialized = split_materialized(named, materialized)
        from streams.table import KTableMapValues
        f = Fn(mapper, "mapValues mapper", (1, 2))
        m = _mapper(f)
        return self._then("KTABLE-MAPVALUES-", "mapValues", lambda s, old: KTableMapValues(m, s, send_old_values=old), named, materialized,
                          value_serde=(materialized.value_serde if materialized else None), args={"mapper": f})

    def toStream(self, named=None, *more):
        """``toStream([Named])``, or Kafka's ``toStream(mapper[, Named])``: the changelog as a
        stream, re-keyed by ``mapper(key, value)`` (``toStream(named).selectKey(mapper)``)."""
        from streams.kstream import KStream
        from streams.serdes_windowed import TimeWindowedSerde, windowed_key_serde
        from streams.table import KTableToStream
        if callable(named) or isinstance(named, str) and more:
            return self.toStream(*more).selectKey(named)
        if more:
            raise TopologyError(f"toStream(): unexpected arguments {more!r}")
        name = self._b.name(_named(named), "KTABLE-TOSTREAM-")
        ks = self.key_serde
        if self._windowed is not None and ks is not None and not isinstance(ks, TimeWindowedSerde):
            # Kafka's windowed table keeps Windowed keys under its windowed serde, so to() writes
            # WindowKeySchema/SessionKeySchema bytes (a Java application reads them back)
            ks = windowed_key_serde(ks, self._windowed)
        node = self._b.add(name, "processor", "toStream", KTableToStream, [self._node],
                           key_serde=ks, value_serde=self.value_serde)
        return KStream(self._b, node, ks, self.value_serde, False)

    def groupBy(self, selector, grouped: Grouped | None = None):
        """``selector(key, value) -> (new_key, new_value)``; or a SQL expression giving the new key
        (the value stays)."""
        from streams.grouped import KGroupedTable
        from streams.table import KTableRepartitionMap
        if self._windowed is not None:
            raise TopologyError("groupBy() on a windowed table: map the stream instead")
        f = Fn(selector, "groupBy selector", (2,))
        if f.is_sql:
            sel = lambda k, v, f=f: (f.evaluate({"key": k, "value": v}), v)
        else:
            sel = f.fn
        self._enable_old_values()
        g = grouped or Grouped()
        name = self._b.name(g.name, "KTABLE-SELECT-")        # Kafka names the select step after the Grouped
        node = self._b.add(name, "processor", "groupBy", lambda: KTableRepartitionMap(sel), [self._node],
                           args={"selector": f})
        return KGroupedTable(self, node, g)

    def _try_old_values(self) -> bool:
        """Kafka's ``enableSendingOldValues(forceMaterialization=false)``: old values are turned on
        up the chain only if it reaches a table that has them without a new store — one already
        sending them, a store named by the user, a materialized filter or mapValues, or an
        aggregation (which always can). An unnamed source table answers no, as Kafka's
        un-materialized ``KTableSource`` does."""
        chain, node = [], self._node
        while True:
            opts = node.args.get("opts")
            if opts is None or type(opts) is not dict:     # a join result's: asking would force both sides
                return False
            if opts.get("send_old_values"):
                break
            chain.append(opts)
            if node.op in _AGGREGATIONS or (node.stores and (node.op in ("filter", "filterNot", "mapValues")
                                                             or node.args.get("queryable"))):
                break
            if node.stores or node.op not in ("filter", "filterNot", "mapValues") or not node.parents:
                return False
            node = node.parents[0]
        for opts in chain:
            opts["send_old_values"] = True
        return True

    def _enable_old_values(self) -> None:
        """Kafka's ``enableSendingOldValues``: a downstream step that needs each change's old value
        (a re-grouping subtracts it) turns old values on up to the nearest store that has them."""
        node = self._node
        while node is not None:
            opts = node.args.get("opts")
            if opts is None:
                return
            opts["send_old_values"] = True
            if materialize_source(node) or node.stores:
                return
            node = node.parents[0] if node.parents else None

    def suppress(self, suppressed) -> "KTable":
        from streams.suppress import SuppressProcessor, Suppressed
        from streams.stores import StoreSpec
        if self._versioned_upstream():
            # a late update would reach the buffer and be emitted as the final result
            raise TopologyError("suppress() is only supported for non-versioned KTables (note that version "
                                "semantics might be inherited from upstream)")
        if not isinstance(suppressed, Suppressed):
            raise TopologyError(f"suppress() takes a Suppressed (Suppressed.untilWindowCloses or untilTimeLimit), "
                                f"got {suppressed!r}", argument="suppressed")
        windows = self._windowed
        if suppressed.untilClose and windows is None:
            # Kafka's GraphGraceSearchUtil: the windowed aggregations up the graph, or refused now
            from streams.grace_search import find_window_grace
            windows = find_window_grace(self._node, self._b._nodes)
        given = getattr(suppressed, "name", None)
        # KTableSuppressProcessorSupplier: the buffer keeps each key's prior value (what its view
        # reads for a buffered key), so it needs the parent's old values
        self._enable_old_values()
        name = given or self._b.next_name("KTABLE-SUPPRESS-")
        spec = StoreSpec(f"{given}-store" if given else self._b.next_name("KTABLE-SUPPRESS-STATE-STORE-"), "keyValue",
                         log_config=dict(getattr(suppressed.bufferConfig, "logConfig", ())))
        node = self._b.add(name, "processor", "suppress",
                           lambda: SuppressProcessor(spec.name, suppressed, windows, self.key_serde,
                                                     self.value_serde), [self._node], (spec,),
                           key_serde=self.key_serde, value_serde=self.value_serde)
        return KTable(self._b, node, self.key_serde, self.value_serde, None, self._windowed)

    def join(self, other, joiner=None, *args, foreign_key=None, named=None, materialized=None, table_joined=None):
        """``join(other, joiner[, Named][, Materialized])`` on the primary key, or the foreign-key
        join ``join(other, foreignKeyExtractor, joiner[, TableJoined][, Materialized])`` (or
        ``foreign_key=``)."""
        return self._join("inner", other, joiner, args, foreign_key, named, materialized, table_joined)

    def leftJoin(self, other, joiner=None, *args, foreign_key=None, named=None, materialized=None, table_joined=None):
        return self._join("left", other, joiner, args, foreign_key, named, materialized, table_joined)

    def outerJoin(self, other, joiner=None, *args, named=None, materialized=None):
        return self._join("outer", other, joiner, args, None, named, materialized, None)

    def _join(self, kind, other, joiner, args, foreign_key, named, materialized, table_joined):
        from streams.join_dsl import foreign_key as fk_join, table_table
        from streams.joins import TableJoined
        if not isinstance(other, KTable) or other._b is not self._b:
            raise TopologyError("a KTable joins another KTable of the same builder")
        rest = list(args)
        if foreign_key is None and rest and not isinstance(rest[0], (Materialized, TableJoined)) \
                and not _is_named(rest[0]):
            foreign_key, joiner, rest = joiner, rest[0], rest[1:]
        for a in rest:
            if isinstance(a, Materialized):
                materialized = a
            elif isinstance(a, TableJoined):
                table_joined = a
            else:
                named = a
        if foreign_key is not None:
            return fk_join(self, other, kind, foreign_key, joiner, table_joined or (TableJoined(_named(named))
                           if named is not None else None), materialized)
        return table_table(self, other, kind, joiner, named, materialized)


_AGGREGATIONS = ("count", "reduce", "aggregate", "cogroup-merge")


def _is_named(arg) -> bool:
    from streams.parameters import Named
    return isinstance(arg, Named)


def _predicate(f: Fn):
    if f.is_sql:
        return lambda k, v: f.evaluate({"key": k, "value": v}) is True
    return f.fn


def _mapper(f: Fn):
    if f.is_sql:
        return lambda k, v: f.evaluate({"key": k, "value": v})
    return (lambda k, v: f.fn(v)) if f.arity == 1 else f.fn
