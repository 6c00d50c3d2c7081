"""Spark schemas for the serdes, read without a JVM: the reference interpreter runs without Spark,
so a DDL string (``"user STRING, amount DOUBLE"``) is parsed here rather than by
``StructType.fromDDL`` (which needs a SparkContext).

The grammar is Spark's for the types serdes carry: ``name [:] TYPE [NOT NULL] [COMMENT '...']``
fields; ``STRING``, ``BOOLEAN``, ``TINYINT``/``BYTE``, ``SMALLINT``/``SHORT``, ``INT``/``INTEGER``,
``BIGINT``/``LONG``, ``FLOAT``/``REAL``, ``DOUBLE``, ``BINARY``, ``DATE``, ``TIMESTAMP``,
``TIMESTAMP_NTZ``, ``DECIMAL(p, s)``, ``ARRAY<t>``, ``MAP<k, v>``, ``STRUCT<name: t, ...>``;
names may be quoted with backticks.
"""
from __future__ import annotations

import re

from pyspark.sql import types as T

from broker.errors import InvalidConfigError

_TOKEN = re.compile(r"\s*(?:(`(?:[^`]|``)*`)|('(?:[^'\\]|\\.)*')|([A-Za-z_][A-Za-z0-9_]*)|(\d+)|([<>(),:]))")

_SIMPLE = {
    "STRING": T.StringType, "VARCHAR": T.StringType, "CHAR": T.StringType, "BOOLEAN": T.BooleanType,
    "TINYINT": T.ByteType, "BYTE": T.ByteType, "SMALLINT": T.ShortType, "SHORT": T.ShortType,
    "INT": T.IntegerType, "INTEGER": T.IntegerType, "BIGINT": T.LongType, "LONG": T.LongType,
    "FLOAT": T.FloatType, "REAL": T.FloatType, "DOUBLE": T.DoubleType, "BINARY": T.BinaryType,
    "DATE": T.DateType, "TIMESTAMP": T.TimestampType, "TIMESTAMP_LTZ": T.TimestampType,
    "TIMESTAMP_NTZ": T.TimestampNTZType,
}


def struct_schema(schema, what: str = "schema") -> T.StructType:
    """``schema`` (a StructType or a DDL string of fields) as a StructType; a bad one is an
    :class:`InvalidConfigError` naming the problem."""
    if isinstance(schema, T.StructType):
        return schema
    if not isinstance(schema, str):
        raise InvalidConfigError(f"{what} must be a pyspark StructType or a DDL string, not {type(schema).__name__}")
    text = schema.strip()
    if text.upper().startswith("STRUCT<") and text.endswith(">"):
        text = text[7:-1]
    return _Parser(text, what).fields_until_end()


def data_type(text, what: str = "type"):
    """One Spark type (a DataType or DDL such as ``"bigint"``, ``"array<string>"``,
    ``"struct<a: int>"``), read without a JVM."""
    if isinstance(text, T.DataType):
        return text
    if not isinstance(text, str):
        raise InvalidConfigError(f"{what} must be a pyspark DataType or a DDL string, not {type(text).__name__}")
    parser = _Parser(text.strip(), what)
    dtype = parser.type()
    if parser.peek() is not None:
        parser.fail(f"unexpected {parser.peek()!r}")
    return dtype


class _Parser:
    def __init__(self, text: str, what: str):
        self.text, self.what, self.tokens, pos = text, what, [], 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if not m or m.end() == pos:
                if text[pos:].strip() == "":
                    break
                self.fail(f"unexpected character at {pos}: {text[pos:pos + 10]!r}")
            self.tokens.append(next(g for g in m.groups() if g is not None))
            pos = m.end()
        self.i = 0

    def fail(self, message: str):
        raise InvalidConfigError(f"{self.what} {self.text!r} is not a valid Spark DDL schema: {message}")

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token.upper() != expected):
            self.fail(f"expected {expected or 'more'}, found {token or 'the end'}")
        self.i += 1
        return token

    def fields_until_end(self) -> T.StructType:
        fields = self.fields(None)
        if self.peek() is not None:
            self.fail(f"unexpected {self.peek()!r}")
        return fields

    def fields(self, closer: str | None) -> T.StructType:
        out = []
        while self.peek() is not None and self.peek() != closer:
            name = self.take()
            if name.startswith("`"):
                name = name[1:-1].replace("``", "`")
            elif not re.match(r"[A-Za-z_]", name):
                self.fail(f"expected a field name, found {name!r}")
            if self.peek() == ":":
                self.take()
            dtype = self.type()
            nullable = True
            if (self.peek() or "").upper() == "NOT":
                self.take()
                self.take("NULL")
                nullable = False
            if (self.peek() or "").upper() == "COMMENT":
                self.take()
                self.take()
            out.append(T.StructField(name, dtype, nullable))
            if self.peek() == ",":
                self.take()
        if not out:
            self.fail("no fields")
        return T.StructType(out)

    def type(self) -> T.DataType:
        word = self.take().upper()
        if word in _SIMPLE:
            if word in ("VARCHAR", "CHAR") and self.peek() == "(":
                self.take(), self.take(), self.take(")")
            return _SIMPLE[word]()
        if word in ("DECIMAL", "DEC", "NUMERIC"):
            if self.peek() != "(":
                return T.DecimalType(10, 0)
            self.take("(")
            precision, scale = int(self.take()), 0
            if self.peek() == ",":
                self.take()
                scale = int(self.take())
            self.take(")")
            return T.DecimalType(precision, scale)
        if word == "ARRAY":
            self.take("<")
            element = self.type()
            self.take(">")
            return T.ArrayType(element)
        if word == "MAP":
            self.take("<")
            key = self.type()
            self.take(",")
            value = self.type()
            self.take(">")
            return T.MapType(key, value)
        if word == "STRUCT":
            self.take("<")
            fields = self.fields(">")
            self.take(">")
            return fields
        self.fail(f"unknown type {word}")
