"""The JSON serde: UTF-8 JSON text, as Kafka users' JSON serdes (Jackson-based) write it.

**With a schema** (``Serdes.Json("user STRING, amount DOUBLE")``) a value is a dict with exactly
the schema's fields, coerced as Spark's ``from_json`` coerces them, so the interpreter and a
query see the same values: ``120`` in a DOUBLE field is ``120.0``; a missing field is None;
unknown fields are dropped; a number, boolean, object or array in a STRING field is its JSON text
(numbers with a fraction or exponent formatted as Java's ``Double.toString``, as Spark does);
``"NaN"``, ``"Infinity"``, ``"+Infinity"``, ``"-Infinity"``, ``"+INF"``, ``"-INF"`` and the bare
tokens ``NaN``/``Infinity``/``-Infinity`` are floats; anything after the first JSON value is
ignored; empty or blank text is null. A record Spark's PERMISSIVE mode would turn into nulls
(text that is not JSON, a top-level non-object, a value of the wrong type, an integer out of
range) is a :class:`SerializationError` here, and ``decode`` runs ``from_json`` in FAILFAST mode
so the query fails too (``on_error="null"``: the whole value becomes null instead, never a
half-filled struct). Supported field types: STRING, BOOLEAN, TINYINT, SMALLINT, INT, BIGINT,
FLOAT, DOUBLE, ARRAY, MAP with STRING keys, STRUCT.

Writing: fields in schema order, nulls written (``to_json`` with ``ignoreNullFields=false``),
compact, non-ASCII unescaped, doubles and floats formatted as Spark formats them (Java's
``Double.toString``/``Float.toString``, NaN and infinities as the strings ``"NaN"``,
``"Infinity"``, ``"-Infinity"``). Bytes from Python and from Spark then agree for ordinary values,
but the contract is equal *values* after reading back: Java 17's ``Double.toString`` is not always
the shortest text, and escapes of control characters may differ.

**Without a schema** any JSON value is accepted and written with ``json.dumps`` (compact,
non-ASCII unescaped; NaN and infinities are refused: they are not JSON). Spark has no type for
"any JSON", so the Spark side is STRING: the JSON text as written (checked with
``try_parse_json``), not a parsed value. Both sides read the same texts as JSON, so a record is
bad whichever side reads it: the first JSON value counts and what follows it is ignored (as
Jackson's ``ObjectMapper.readTree`` ignores trailing tokens); the tokens ``NaN``/``Infinity`` are
refused (as Jackson refuses them by default); an object with a repeated key and a string with a
lone surrogate escape (``"\ud800"``) are refused, as Spark's variant parser refuses them (Jackson
would take the last value and the lone surrogate).
"""
from __future__ import annotations

import json
import math
import re
import struct
from dataclasses import dataclass
from typing import Any

from pyspark.sql import types as T

from broker.errors import InvalidConfigError
from streams.serde_base import Serde, _Where
from streams.serdes_schema import struct_schema

_FLOAT_WORDS = {"NaN": math.nan, "Infinity": math.inf, "+Infinity": math.inf, "+INF": math.inf,
                "-Infinity": -math.inf, "-INF": -math.inf}
_INT_RANGE = {T.ByteType: 8, T.ShortType: 16, T.IntegerType: 32, T.LongType: 64}
_FLOAT_MAX = struct.unpack(">f", bytes.fromhex("7f7fffff"))[0]


class _Bad(Exception):
    """A value that does not fit the schema (the path and why), turned into a SerializationError."""


@dataclass(frozen=True, repr=False)
class JsonSerde(Serde):
    schema: T.StructType | None = None
    kafka_name = "Json"

    @classmethod
    def of(cls, schema=None) -> "JsonSerde":
        if schema is None:
            return cls()
        schema = struct_schema(schema, "Json schema")
        _check_supported(schema, "")
        return cls(schema)

    @property
    def name(self) -> str:
        return f"Json<{self.schema.simpleString()}>" if self.schema is not None else "Json"

    def __repr__(self) -> str:
        return f"Serdes.Json({self.schema.simpleString()!r})" if self.schema is not None else "Serdes.Json()"

    # ------------------------------------------------------------------------------ Python side
    def _serialize(self, obj) -> bytes:
        if self.schema is None:
            return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
        try:
            return _write(self.schema, obj, "").encode("utf-8")
        except _Bad as e:
            raise self.error(f"cannot serialize {str(e)}") from None

    def _deserialize(self, data: bytes, topic):
        text = data.decode("utf-8", errors="replace")
        if self.schema is None:
            try:
                return _any_json(text)
            except ValueError as e:
                raise self.error(f"not JSON: {e}", topic, length=len(data)) from None
        if not text.strip():
            return None
        try:
            value, _ = json.JSONDecoder().raw_decode(text, len(text) - len(text.lstrip()))
        except ValueError as e:
            raise self.error(f"not JSON: {e}", topic, length=len(data)) from None
        try:
            return _read(self.schema, value, "", top=True)
        except _Bad as e:
            raise self.error(str(e), topic, field=str(e).split(":")[0], length=len(data)) from None

    # ------------------------------------------------------------------------------- Spark side
    def spark_type(self):
        return self.schema if self.schema is not None else T.StringType()

    def _decode(self, col, on_error, topic):
        from pyspark.sql import functions as F
        text = F.make_valid_utf8(col.cast("string"))
        if self.schema is None:
            bad = self._bad(on_error, F.concat(F.lit("not JSON: "), F.substring(text, 1, 60)), topic)
            return F.when(F.try_parse_json(text).isNotNull(), text).otherwise(bad)
        options = {"allowSingleQuotes": "false"}
        if on_error == "fail" and not isinstance(topic, _Where):
            return F.from_json(text, self.schema, {**options, "mode": "FAILFAST"})
        corrupt = "_corrupt_record"
        while corrupt in self.schema.fieldNames():
            corrupt = "_" + corrupt
        with_corrupt = T.StructType(self.schema.fields + [T.StructField(corrupt, T.StringType())])
        parsed = F.from_json(text, with_corrupt, {**options, "mode": "PERMISSIVE",
                                                  "columnNameOfCorruptRecord": corrupt})
        # Given where the records come from, a bad one fails with the serde's message naming it
        # (FAILFAST's MALFORMED_RECORD_IN_PARSING names no row); PERMISSIVE flags the same records.
        bad = self._bad(on_error, F.concat(F.lit("not JSON of this schema: "), F.substring(text, 1, 60)), topic)
        return F.when(parsed[corrupt].isNull(), parsed.dropFields(corrupt)).otherwise(bad)

    def _encode(self, col):
        from pyspark.sql import functions as F
        if self.schema is None:
            return col.cast("binary")
        return F.to_json(col, {"ignoreNullFields": "false"}).cast("binary")


_JSON_SPACE = " \t\n\r"
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _any_json(text: str):
    """The first JSON value of ``text``, read as the Spark side's ``try_parse_json`` checks it."""
    decoder = json.JSONDecoder(parse_constant=_refuse_constant, object_pairs_hook=_unique_keys)
    value, end = decoder.raw_decode(text, len(text) - len(text.lstrip(_JSON_SPACE)))
    after = text[end:end + 1]
    # Jackson, under Spark's parser, ends a top-level number only at white space
    # (ReaderBasedJsonParser._verifyRootSpace) and a literal at a character no identifier takes.
    if after and isinstance(value, (int, float)) and not isinstance(value, bool) and after not in _JSON_SPACE:
        raise ValueError(f"unexpected character {after!r} after the number")
    if after and (value is None or isinstance(value, bool)) and (after.isalnum() or after in "_$"):
        raise ValueError(f"unrecognized token starting {text[:end + 1].strip()!r}")
    _check_strings(value)
    return value


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a JSON value")


def _unique_keys(pairs: list) -> dict:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"duplicate object key {key!r}")
    return out


def _check_strings(v) -> None:
    if isinstance(v, str):
        if _LONE_SURROGATE.search(v):
            raise ValueError(f"lone surrogate in string {_clip(v.encode('utf-8', 'backslashreplace').decode())}")
    elif isinstance(v, list):
        for x in v:
            _check_strings(x)
    elif isinstance(v, dict):
        for k, x in v.items():
            _check_strings(k)
            _check_strings(x)


def _check_supported(dt: T.DataType, path: str) -> None:
    if isinstance(dt, T.StructType):
        for f in dt.fields:
            _check_supported(f.dataType, f"{path}.{f.name}" if path else f.name)
    elif isinstance(dt, T.ArrayType):
        _check_supported(dt.elementType, f"{path}[]")
    elif isinstance(dt, T.MapType):
        if not isinstance(dt.keyType, T.StringType):
            raise InvalidConfigError(f"Json schema field {path}: map keys must be STRING, not {dt.keyType.simpleString()}")
        _check_supported(dt.valueType, f"{path}{{}}")
    elif not isinstance(dt, (T.StringType, T.BooleanType, T.FloatType, T.DoubleType, *_INT_RANGE)):
        raise InvalidConfigError(f"Json schema field {path}: type {dt.simpleString()} is not supported by the Json "
                                 "serde (use STRING and convert, or Serdes.Struct)")


# ------------------------------------------------------------------------------------- reading
def _read(dt: T.DataType, v: Any, path: str, top: bool = False) -> Any:
    """``v`` (as ``json.loads`` returns it) coerced to ``dt`` as Spark's JSON parser does."""
    if v is None:
        if top:
            raise _Bad("the value is JSON null, expected an object")
        return None
    if isinstance(dt, T.StringType):
        return v if isinstance(v, str) else _java_json(v)
    if isinstance(dt, T.BooleanType):
        if isinstance(v, bool):
            return v
    elif type(dt) in _INT_RANGE:
        bits = _INT_RANGE[type(dt)]
        if isinstance(v, int) and not isinstance(v, bool):
            if -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
                return v
            raise _Bad(f"{path or 'value'}: {v} is out of range for {dt.simpleString()}")
    elif isinstance(dt, (T.DoubleType, T.FloatType)):
        if isinstance(v, str) and v in _FLOAT_WORDS:
            v = _FLOAT_WORDS[v]
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            try:
                x = float(v)
            except OverflowError:   # an integer beyond the double range, as Jackson reads it
                x = math.copysign(math.inf, v)
            return _to_float32(x) if isinstance(dt, T.FloatType) else x
    elif isinstance(dt, T.ArrayType):
        if isinstance(v, list):
            return [_read(dt.elementType, x, f"{path}[{i}]") for i, x in enumerate(v)]
    elif isinstance(dt, T.MapType):
        if isinstance(v, dict):
            return {k: _read(dt.valueType, x, f"{path}.{k}") for k, x in v.items()}
    elif isinstance(dt, T.StructType):
        if isinstance(v, dict):
            return {f.name: _read(f.dataType, v.get(f.name), f"{path}.{f.name}" if path else f.name)
                    for f in dt.fields}
    raise _Bad(f"{path or 'value'}: {_kind(v)} {_clip(v)} is not a {dt.simpleString()}")


def _to_float32(x: float) -> float:
    if math.isnan(x) or math.isinf(x):
        return x
    try:
        return struct.unpack(">f", struct.pack(">f", x))[0]
    except OverflowError:       # Java's (float) of a double beyond Float.MAX_VALUE
        return math.copysign(math.inf, x)


def _kind(v) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object"}.get(type(v), type(v).__name__)


def _clip(v) -> str:
    text = json.dumps(v, ensure_ascii=False)
    return text if len(text) <= 40 else text[:37] + "..."


# ------------------------------------------------------------------------------------- writing
def _write(dt: T.DataType, v: Any, path: str) -> str:
    """``v`` as the JSON text Spark's ``to_json`` writes for a ``dt`` value."""
    if v is None:
        return "null"
    if isinstance(dt, T.StringType):
        if isinstance(v, str):
            return json.dumps(v, ensure_ascii=False)
    elif isinstance(dt, T.BooleanType):
        if isinstance(v, bool):
            return "true" if v else "false"
    elif type(dt) in _INT_RANGE:
        if isinstance(v, int) and not isinstance(v, bool):
            bits = _INT_RANGE[type(dt)]
            if -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
                return str(v)
            raise _Bad(f"{path or 'value'}: {v} is out of range for {dt.simpleString()}")
    elif isinstance(dt, (T.DoubleType, T.FloatType)):
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            x = float(v)
            if math.isnan(x):
                return '"NaN"'
            if math.isinf(x):
                return '"Infinity"' if x > 0 else '"-Infinity"'
            return _java_float(_to_float32(x)) if isinstance(dt, T.FloatType) else _java_double(x)
    elif isinstance(dt, T.ArrayType):
        if isinstance(v, (list, tuple)):
            return "[" + ",".join(_write(dt.elementType, x, f"{path}[{i}]") for i, x in enumerate(v)) + "]"
    elif isinstance(dt, T.MapType):
        if isinstance(v, dict):
            return "{" + ",".join(json.dumps(str(k), ensure_ascii=False) + ":" + _write(dt.valueType, x, f"{path}.{k}")
                                  for k, x in v.items()) + "}"
    elif isinstance(dt, T.StructType):
        if isinstance(v, dict):
            return "{" + ",".join(json.dumps(f.name, ensure_ascii=False) + ":"
                                  + _write(f.dataType, v.get(f.name), f"{path}.{f.name}" if path else f.name)
                                  for f in dt.fields) + "}"
    raise _Bad(f"{path or 'value'}: {type(v).__name__} {_short_repr(v)} is not a {dt.simpleString()}")


def _short_repr(v) -> str:
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _java_json(v) -> str:
    """Compact JSON text of a parsed value as Spark copies it into a STRING field (Jackson:
    integers as written, other numbers as Java's ``Double.toString``)."""
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return _java_double(v)
    if isinstance(v, list):
        return "[" + ",".join(_java_json(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + _java_json(x) for k, x in v.items()) + "}"
    return json.dumps(v, ensure_ascii=False)


def _java_double(x: float) -> str:
    """Java's ``Double.toString`` (shortest digits, as JDK 19+ writes them)."""
    return _java_format(repr(x))


def _java_float(x: float) -> str:
    """Java's ``Float.toString`` of a value that is exactly a float."""
    for digits in range(1, 10):
        text = f"{x:.{digits}g}"
        if _to_float32(float(text)) == x:
            return _java_format(repr(float(text)))
    return _java_format(repr(x))


def _java_format(shortest: str) -> str:
    """Python's shortest repr of a finite float in Java's layout: plain for 1e-3 <= |x| < 1e7,
    otherwise ``d.dddE[-]n``; always a digit after the point."""
    sign = "-" if shortest.startswith("-") else ""
    mantissa, _, exp = shortest.lstrip("-").partition("e")
    int_part, _, frac = mantissa.partition(".")
    digits = (int_part + frac).lstrip("0")
    if not digits:
        return sign + "0.0"
    point = len(int_part) + (int(exp) if exp else 0) - (len(int_part + frac) - len((int_part + frac).lstrip("0")))
    digits = digits.rstrip("0")
    # value = 0.digits × 10^point
    if -2 <= point <= 7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        whole, rest = digits[:point].ljust(point, "0"), digits[point:]
        return f"{sign}{whole}.{rest or '0'}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point - 1}"
