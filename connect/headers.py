"""Header values as Kafka's SimpleHeaderConverter writes them: :func:`header_string` is
``Values.convertToString`` of a column of any Spark type, :func:`literal_header` is
``Values.parseString`` then ``Values.convertToString`` of a config literal (InsertHeader's
``value.literal``). Shared by the header transforms and Debezium's ``add.headers``.
"""
from __future__ import annotations

import re

from pyspark.sql import functions as F
from pyspark.sql.types import (BinaryType, DateType, DecimalType, IntegerType, MapType, StringType, StructType,
                               TimestampNTZType, TimestampType)

from connect.cast import base64_string, decimal_string, kafka_date_string
from connect.java_text import java_double
from connect.transform_base import TIME, connect_name


def header_bytes(c, t, metadata: dict | None = None):
    """A value as header bytes, as SimpleHeaderConverter writes it: UTF-8 of
    :func:`header_string`; a null value is a null header."""
    return F.encode(header_string(c, t, metadata), "UTF-8")


def header_string(c, t, metadata: dict | None = None, embedded: bool = False):
    """Kafka's ``Values.convertToString`` (``Values.append``) of a value of Spark type ``t``
    (``metadata``: its StructField's, which marks a Connect Time). A string is itself, bytes are
    base64 on one line, a number is Java's ``toString`` (``1.0E10``, a Decimal ``1E-7``), a
    Timestamp, Date or Time is written by ``Values.dateFormatFor`` (by its instant, in UTC: a Date
    is ``2017-07-14``, a Time ``01:00:00.000Z``). A struct, map or array is ``{"a":1,"b":[…]}``:
    inside it strings and bytes are quoted with only ``\\`` and ``"`` escaped (a newline stays raw),
    temporal values are not quoted, null is ``null``. Top-level null stays null (no header value);
    a map keeps the order its entries were read in (Kafka's converter reads a JSON object into a
    ``HashMap``)."""
    if isinstance(t, (StructType, MapType)) or t.typeName() == "array":
        if isinstance(t, StructType):
            parts = []
            for i, f in enumerate(t.fields):
                parts += [F.lit(("," if i else "") + _quoted(f.name) + ":"),
                          header_string(c.getField(f.name), f.dataType, f.metadata, True)]
            body = F.concat(*parts) if parts else F.lit("")
        elif isinstance(t, MapType):
            body = F.array_join(F.transform(F.map_entries(c), lambda e: F.concat(
                header_string(e["key"], t.keyType, None, True), F.lit(":"),
                header_string(e["value"], t.valueType, None, True))), ",")
        else:
            body = F.array_join(F.transform(c, lambda x: header_string(x, t.elementType, None, True)), ",")
        open_, close = ("[", "]") if t.typeName() == "array" else ("{", "}")
        out = F.when(c.isNotNull(), F.concat(F.lit(open_), body, F.lit(close)))
    elif isinstance(t, (StringType, BinaryType)):
        out = c if isinstance(t, StringType) else base64_string(c)
        if embedded:
            out = F.concat(F.lit('"'), F.regexp_replace(F.regexp_replace(out, r"\\", r"\\\\"), '"', r'\\"'),
                           F.lit('"'))
    elif isinstance(t, (TimestampType, TimestampNTZType)):
        out = kafka_date_string(c.cast("timestamp"))
    elif isinstance(t, DateType):
        out = kafka_date_string(F.timestamp_millis(F.unix_date(c).cast("long") * 86_400_000))
    elif isinstance(t, IntegerType) and connect_name(metadata) == TIME:
        out = kafka_date_string(F.timestamp_millis(c.cast("long")))
    elif isinstance(t, DecimalType):
        out = decimal_string(c, t)
    else:   # integers, Float/Double.toString (Spark writes them as Java does), booleans
        out = c.cast("string")
    return F.coalesce(out, F.lit("null")) if embedded else out


def _quoted(name: str) -> str:
    """A struct field's name as ``Values.append`` writes it embedded: quoted, ``\\`` and ``"`` escaped."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


# ------------------------------------------------------------------ Values.parseString for InsertHeader
_DELIMS = set(':,{}[]"')


def _tokens(text: str) -> list[str]:
    """Values.Parser's tokens: runs between unescaped ``: , { } [ ] "``, and those delimiters."""
    out, start, escaped = [], 0, False
    for i, ch in enumerate(text):
        if ch == "\\":
            escaped = not escaped
            continue
        if ch in _DELIMS and not escaped:
            if start < i:
                out.append(text[start:i])
            out.append(ch)
            start = i + 1
        escaped = False
    if start < len(text):
        out.append(text[start:])
    return out


class _Unparsed(Exception):
    pass


def _number(token: str):
    """ValueParser.parseAsNumber's (type, text): int8…int64 if exact, else float32/float64 when the
    scale is not 0, else a Decimal."""
    from decimal import Decimal, InvalidOperation
    try:
        d = Decimal(token)
    except InvalidOperation:
        raise _Unparsed from None
    if not d.is_finite() or not re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", token):
        raise _Unparsed
    if d == d.to_integral_value() and -(1 << 63) <= int(d) < (1 << 63):
        return "int", str(int(d))
    import numpy as np
    scale = -d.as_tuple().exponent
    with np.errstate(over="ignore"):
        if scale != 0 and np.isfinite(np.float32(float(d))):
            return "float", java_double(float(d), True)
        if scale != 0 and np.isfinite(float(d)):
            return "double", java_double(float(d))
    return "decimal", _big_decimal_string(d)


def _big_decimal_string(d) -> str:
    """``BigDecimal.toString()``: plain unless the adjusted exponent is below -6 or the scale negative."""
    sign, digits, exp = d.as_tuple()
    coeff = "".join(map(str, digits)) or "0"
    adjusted = len(coeff) - 1 + exp
    if exp <= 0 and adjusted >= -6:
        return str(d)
    mantissa = coeff[0] + ("." + coeff[1:] if len(coeff) > 1 else "")
    return ("-" if sign else "") + mantissa + "E" + (f"+{adjusted}" if adjusted > 0 else str(adjusted))


_TEMPORAL = re.compile(r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}:\d{2}\.\d{3}Z)?|\d{2}:\d{2}:\d{2}\.\d{3}Z")


class _ValueParser:
    """Values.ValueParser over a token list; values come back already written as
    ``Values.convertToString`` writes them (``embedded``: inside an array or map, strings quoted)."""

    def __init__(self, text):
        self.text, self.toks, self.i = text, _tokens(text), 0

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else None

    def consume(self, tok):
        """Parser.canConsume: blank tokens before the next one are skipped for good."""
        while self.peek() is not None and not self.peek().strip() and self.i + 1 < len(self.toks):
            self.i += 1
        if self.peek() is not None and self.peek().strip() == tok:
            self.i += 1
            return True
        return False

    def parse(self, embedded):
        if self.peek() is None:
            return None
        if embedded and self.consume('"'):
            parts = []
            while self.peek() is not None and not self.consume('"'):
                parts.append(self.toks[self.i])
                self.i += 1
            content = "".join(parts)
            return '"' + content.replace("\\", "\\\\").replace('"', '\\"') + '"' if not _TEMPORAL.fullmatch(content) \
                else content
        for literal in ("null", "true", "false"):
            mark = self.i
            if self.consume(literal) and (embedded or self.peek() is None):
                return None if literal == "null" else literal
            self.i = mark
        mark = self.i
        try:
            if self.consume("["):
                return self.collection("]", lambda: self.parse(True))
            if self.consume("{"):
                return self.collection("}", self.entry)
        except _Unparsed:
            self.i = mark
        token = self.toks[self.i]
        self.i += 1
        if not token.strip():
            return token
        token = token.strip()
        if token[0].isdigit():   # a time or timestamp spans ':' tokens: try five tokens, then one
            five = token + "".join(self.toks[self.i:self.i + 4])
            if self.i + 4 <= len(self.toks) and _TEMPORAL.fullmatch(five.replace("\\:", ":")):
                self.i += 4
                return five.replace("\\:", ":")
            if _TEMPORAL.fullmatch(token):
                return token
        if token[0].isdigit() or token[0] in "+-":
            try:
                return _number(token)[1]
            except _Unparsed:
                pass
        if embedded:
            raise _Unparsed
        self.i = len(self.toks)
        return self.text

    def entry(self):
        key = self.parse(True)
        if key is None or key == "null" or not self.consume(":"):
            raise _Unparsed
        value = self.parse(True)
        return f"{key}={'null' if value is None else value}"

    def collection(self, end, element):
        items = []
        while self.peek() is not None:
            if self.consume(end):
                return ("[" if end == "]" else "{") + ",".join(items) + end
            if self.consume(","):
                raise _Unparsed
            item = element()
            items.append("null" if item is None else item)
            if self.peek() != end and not self.consume(","):
                raise _Unparsed
        raise _Unparsed


def literal_header(text: str) -> str | None:
    """InsertHeader's ``value.literal`` as SimpleHeaderConverter writes it: ``Values.parseString``
    then ``Values.convertToString`` (a whole literal that is not one value stays the string)."""
    if text == "":
        return ""
    return _ValueParser(text).parse(False)
