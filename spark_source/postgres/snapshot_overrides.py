"""Debezium's ``snapshot.select.statement.overrides``: the snapshot reads a listed table through a
SELECT of the user's instead of the whole table (``RelationalDatabaseConnectorConfig.
getSnapshotSelectOverridesByTable``).

``snapshot.select.statement.overrides`` lists ``schema.table`` names (comma-separated), and
``snapshot.select.statement.overrides.<schema>.<table>`` holds each one's statement. Names match
ignoring case (Spark passes option keys in lower case). The statement's columns are the table's by
name, as Debezium maps a result set's columns; a column it leaves out is null (a ``NOT NULL`` one
gets its fallback, as a delete's ``before`` does). Unlike Debezium, which logs a warning and reads
the whole table, a listed table without a statement, or a statement for a table not listed, fails
the start naming the key. Only the snapshot reads the statement; changes stream as always.
"""
from __future__ import annotations

from broker.errors import InvalidConfigError

OPTION = "snapshot.select.statement.overrides"


def is_statement_key(key: str) -> bool:
    return key.lower().startswith(OPTION + ".")


def parse(opts: dict) -> tuple[tuple[str, str], ...]:
    """((lower-cased ``schema.table``, statement), ...) from options whose keys are lower-cased."""
    names = [n.strip() for n in str(opts.get(OPTION) or "").split(",") if n.strip()]
    statements = {k[len(OPTION) + 1:]: str(v) for k, v in opts.items() if is_statement_key(k)}
    out = []
    for name in names:
        statement = statements.pop(name.lower(), "").strip().rstrip(";").strip()
        if not statement:
            raise InvalidConfigError(f"option '{OPTION}': {name} is listed but {OPTION}.{name} (its SELECT) is not set",
                                     config=OPTION)
        out.append((name.lower(), statement))
    for name in statements:
        raise InvalidConfigError(f"option '{OPTION}.{name}': the table is not listed in {OPTION}",
                                 config=f"{OPTION}.{name}")
    return tuple(out)


def statement_for(overrides: tuple[tuple[str, str], ...], schema: str, table: str) -> str | None:
    name = f"{schema}.{table}".lower()
    return next((sql for listed, sql in overrides if listed == name), None)
