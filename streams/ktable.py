"""``KTable``: a changelog stream read as a table (the latest value per key). Its records carry
``Change(new, old)``; ``toStream()`` turns them back into a record stream."""
from __future__ import annotations

from streams.errors import TopologyError
from streams.functions import Fn
from streams.parameters import Grouped, Materialized


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

    def queryableStoreName(self) -> str | None:
        return self._store_name

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
        from streams.table import KTableFilter
        f = Fn(predicate, "filter predicate", (2,))
        test = _predicate(f)
        return self._then("KTABLE-FILTER-", "filter", lambda s, old: KTableFilter(test, False, s, send_old_values=old), named, materialized,
                          args={"predicate": f})

    def filterNot(self, predicate, named=None, materialized: Materialized | None = None) -> "KTable":
        from streams.table import KTableFilter
        f = Fn(predicate, "filterNot predicate", (2,))
        test = _predicate(f)
        return self._then("KTABLE-FILTER-", "filterNot", lambda s, old: KTableFilter(test, True, s, send_old_values=old), named,
                          materialized, args={"predicate": f})

    def mapValues(self, mapper, named=None, materialized: Materialized | None = None) -> "KTable":
        from streams.table import KTableMapValues
        f = Fn(mapper, "mapValues mapper", (1, 2))
        m = _mapper(f)
        return self._then("KTABLE-MAPVALUES-", "mapValues", lambda s, old: KTableMapValues(m, s, send_old_values=old), named, materialized,
                          value_serde=(materialized.value_serde if materialized else None), args={"mapper": f})

    def toStream(self, named=None):
        from streams.kstream import KStream
        from streams.table import KTableToStream
        name = self._b.name(_named(named), "KTABLE-TOSTREAM-")
        node = self._b.add(name, "processor", "toStream", KTableToStream, [self._node],
                           key_serde=self.key_serde, value_serde=self.value_serde)
        return KStream(self._b, node, self.key_serde, self.value_serde, False)

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

    def _enable_old_values(self) -> None:
        """Kafka's ``enableSendingOldValues``: a downstream step that needs each change's old value
        (a re-grouping subtracts it) turns old values on up to the nearest store that has them."""
        node = self._node
        while node is not None:
            opts = node.args.get("opts")
            if opts is None:
                return
            opts["send_old_values"] = True
            if node.stores:
                return
            node = node.parents[0] if node.parents else None

    def suppress(self, suppressed) -> "KTable":
        from streams.suppress import SuppressProcessor
        from streams.stores import StoreSpec
        given = getattr(suppressed, "name", None)
        name = given or self._b.next_name("KTABLE-SUPPRESS-")
        spec = StoreSpec(f"{given}-store" if given else self._b.next_name("KTABLE-SUPPRESS-STATE-STORE-"), "keyValue")
        node = self._b.add(name, "processor", "suppress",
                           lambda: SuppressProcessor(spec.name, suppressed, self._windowed), [self._node], (spec,),
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
