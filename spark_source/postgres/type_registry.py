"""The catalog's user-defined types: domains, enums, arrays and extension types, by oid.

pgoutput's Relation message gives a column's type oid and modifier, and for a type that is not
built in, that oid alone says nothing: a domain (``CREATE DOMAIN price AS numeric(10,2)``)
must convert as its base type, an enum carries its labels, ``hstore``/``ltree``/``citext`` are
known by name because an extension gives them a different oid in every database. As Debezium's
``TypeRegistry`` (read from ``pg_type`` when the connector starts, and again when a relation
names an oid it does not know), :meth:`TypeRegistry.load` reads every type that is not built in
(oid >= 16384) in one query; :func:`spark_source.postgres.types.column_type` asks it.

    registry = TypeRegistry.load(conn)
    registry.root(price_oid, -1)        # (1700, 655366): numeric(10,2)
"""
from __future__ import annotations

from dataclasses import dataclass

FIRST_NORMAL_OBJECT_ID = 16384
"""PostgreSQL's first oid for user objects: types below it are built in (types.py knows them)."""

_QUERY = """
    SELECT t.oid, t.typname, t.typtype, t.typcategory, t.typelem, t.typbasetype, t.typtypmod,
           CASE WHEN t.typtype = 'e' THEN ARRAY(SELECT e.enumlabel FROM pg_enum e WHERE e.enumtypid = t.oid
                                                ORDER BY e.enumsortorder) END
    FROM pg_type t WHERE t.oid >= %s"""


@dataclass(frozen=True)
class PgType:
    """One ``pg_type`` row: ``kind`` is ``typtype`` (b base, d domain, e enum, r range, c composite),
    ``element`` the element type of an array (0 otherwise), ``base``/``base_modifier`` a domain's
    ``typbasetype``/``typtypmod``, ``labels`` an enum's labels in ``enumsortorder``."""
    oid: int
    name: str
    kind: str
    element: int = 0
    base: int = 0
    base_modifier: int = -1
    labels: tuple = ()


class TypeRegistry:
    """Types by oid; built-in types are not held (None for them). Immutable once loaded."""

    def __init__(self, types: tuple = ()):
        self._types = {t.oid: t for t in types}

    @classmethod
    def load(cls, conn) -> "TypeRegistry":
        with conn.cursor() as cur:
            cur.execute(_QUERY, (FIRST_NORMAL_OBJECT_ID,))
            return cls(tuple(PgType(oid, name, kind, element if category == "A" else 0, base, typmod,
                                    tuple(labels or ()))
                             for oid, name, kind, category, element, base, typmod, labels in cur.fetchall()))

    def knows(self, oid: int) -> bool:
        return oid < FIRST_NORMAL_OBJECT_ID or oid in self._types

    def get(self, oid: int) -> PgType | None:
        return self._types.get(oid)

    def root(self, oid: int, modifier: int) -> tuple[int, int]:
        """A domain's root type and modifier (Debezium's ``PostgresType.getRootType``), through a
        domain of a domain too: the column's own modifier if it has one, else the nearest
        domain's (``numeric82`` over ``numeric(8,2)`` gives ``(1700, (8 << 16 | 2) + 4)``)."""
        seen = set()
        while True:
            t = self._types.get(oid)
            if t is None or t.kind != "d" or oid in seen:
                return oid, modifier
            seen.add(oid)
            if modifier < 0:
                modifier = t.base_modifier
            oid = t.base

    def element(self, oid: int) -> int:
        """The element type of a user-defined array type (0: not one)."""
        t = self._types.get(oid)
        return t.element if t is not None else 0
