"""Kafka Connect schemas as Arrow/Delta types, JSON values as Python values, and the evolution policy.

Pure. A Debezium change event's ``after``/``before`` struct schema gives the Delta columns:

=====================================================  =======================================
Connect type (logical ``name``)                        Arrow / Delta type
=====================================================  =======================================
int8, int16, int32, int64, float32, float64, boolean   the same width (Delta byte/short/int/long/float/double/boolean)
string; bytes (base64 in JSON)                         string; binary
``io.debezium.time.Date``, Kafka ``Date``              date
``io.debezium.time.MicroTimestamp``, ``Timestamp``,    timestamp_ntz (microseconds, as PostgreSQL's
``NanoTimestamp``, Kafka ``Timestamp``                 ``timestamp`` has no zone)
``io.debezium.time.ZonedTimestamp`` (ISO-8601 string)  timestamp (UTC)
Kafka ``Decimal`` (scale, ``connect.decimal.precision``)  decimal(precision, scale); precision 38 when absent;
                                                       see below for what Delta cannot hold as declared
``io.debezium.data.VariableScaleDecimal``              decimal(38, 18); a value that does not fit exactly is refused
struct, array, map                                     struct, array, map of the above
anything else (MicroTime, Uuid, Json, Enum, ...)       its Connect physical type (Delta has no time type)
=====================================================  =======================================

Delta decimals have 1 to 38 digits and a scale from 0 to the precision (:func:`decimal_type`):
a negative scale ``(p, s)`` becomes ``decimal(p - s, 0)`` and a scale above the precision
``decimal(s, s)``, both holding every value exactly; a precision above 38 becomes ``decimal(38,
min(s, 38))``, and each value is checked: one that does not fit exactly is a poison record whose
message names the source's ``decimal.handling.mode=string`` (exact, as text) or ``double``. So
is a ``VariableScaleDecimal`` (an unconstrained ``numeric``) beyond decimal(38, 18).

A field's Connect ``default`` (``ALTER TABLE ... ADD COLUMN ... DEFAULT x``) is kept
(:func:`defaults`): the sink gives the rows the table already holds that value when the column
is added (see :mod:`~spark_sink.delta.apply`).

Evolution (:func:`evolve`), one rule per case and never a silent drop:

* a **new** source column is added to the table (older rows read null);
* a column the source **no longer sends** stays in the table; an SCD-1 update leaves its value
  (Debezium's JDBC sink sets only the record's fields), an inserted row or SCD-2 version carries null;
* a **retyped** column is accepted when the table's type can be widened to hold every old and new
  value (int8 < int16 < int32 < int64, float32 < float64, int8/16/32 -> float64, decimal(p, s) ->
  decimal(p', s') with p' - s' >= p - s and s' >= s, date -> timestamp_ntz): the table is rewritten
  under the wider type. A source type narrower than the table's is cast up. Anything else raises
  :class:`~spark_sink.delta.errors.SchemaChangeError`.
"""
from __future__ import annotations

import base64
import datetime as dt
import decimal
import hashlib
import json
import uuid
from typing import Any, Callable

import pyarrow as pa

from spark_sink.delta.errors import PoisonRecordError, SchemaChangeError

UNAVAILABLE = type("Unavailable", (), {"__repr__": lambda self: "UNAVAILABLE", "__reduce__": lambda self: "UNAVAILABLE"})()
"""A column Debezium could not read (an unchanged TOAST value): the target keeps its value."""

DEFAULT_PLACEHOLDER = "__debezium_unavailable_value"
EPOCH = dt.datetime(1970, 1, 1)
_DAY0 = dt.date(1970, 1, 1)
_VARIABLE_SCALE = pa.decimal128(38, 18)
MAX_DECIMAL_PRECISION = 38
_EXACT = decimal.Context(prec=1000, traps=[decimal.Inexact, decimal.InvalidOperation])

_PHYSICAL = {"int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
             "float32": pa.float32(), "float64": pa.float64(), "boolean": pa.bool_(),
             "string": pa.string(), "bytes": pa.binary()}
_DATES = {"io.debezium.time.Date", "org.apache.kafka.connect.data.Date"}
_TIMESTAMP_SCALE = {"io.debezium.time.MicroTimestamp": 1, "io.debezium.time.Timestamp": 1000,
                    "org.apache.kafka.connect.data.Timestamp": 1000, "io.debezium.time.NanoTimestamp": None}
_ZONED = "io.debezium.time.ZonedTimestamp"
_DECIMAL = "org.apache.kafka.connect.data.Decimal"
_VARIABLE = "io.debezium.data.VariableScaleDecimal"


def arrow_type(schema: dict) -> pa.DataType:
    """The Arrow type for one Connect field schema (see the module table)."""
    name, kind = schema.get("name"), schema.get("type")
    if name in _DATES:
        return pa.date32()
    if name in _TIMESTAMP_SCALE:
        return pa.timestamp("us")
    if name == _ZONED:
        return pa.timestamp("us", tz="UTC")
    if name == _DECIMAL:
        return decimal_type(*_decimal_parameters(schema))
    if name == _VARIABLE:
        return _VARIABLE_SCALE
    if kind == "struct":
        return pa.struct([arrow_field(f) for f in schema.get("fields", [])])
    if kind == "array":
        return pa.list_(arrow_type(schema["items"]))
    if kind == "map":
        return pa.map_(arrow_type(schema["keys"]), arrow_type(schema["values"]))
    if kind in _PHYSICAL:
        return _PHYSICAL[kind]
    raise ValueError(f"unknown Connect schema type {kind!r}")


def _decimal_parameters(schema: dict) -> tuple[int, int]:
    params = schema.get("parameters") or {}
    return int(params.get("connect.decimal.precision", MAX_DECIMAL_PRECISION)), int(params.get("scale", 0))


def decimal_type(precision: int, scale: int) -> pa.Decimal128Type:
    """The Delta decimal for a source ``decimal(precision, scale)`` (see the module docstring):
    exact for a negative scale or a scale above the precision; capped at 38 digits."""
    if scale < 0:
        precision, scale = precision - scale, 0
    precision = max(precision, scale, 1)
    if precision > MAX_DECIMAL_PRECISION:
        precision, scale = MAX_DECIMAL_PRECISION, min(scale, MAX_DECIMAL_PRECISION)
    return pa.decimal128(precision, scale)


def fit_decimal(d: decimal.Decimal, type_: pa.Decimal128Type, declared: str) -> decimal.Decimal:
    """``d`` at ``type_``'s scale, or ValueError when it does not fit exactly (the message names
    the source option that keeps such values)."""
    try:
        fitted = _EXACT.quantize(d, decimal.Decimal(1).scaleb(-type_.scale))
    except (decimal.Inexact, decimal.InvalidOperation):
        fitted = None
    if fitted is None or fitted != d or len(fitted.as_tuple().digits) > type_.precision:
        raise ValueError(f"{d} ({declared}) does not fit the Delta column's decimal({type_.precision}, "
                         f"{type_.scale}) exactly: Delta decimals hold at most {MAX_DECIMAL_PRECISION} digits. "
                         f"Set decimal.handling.mode=string (exact, as text) or double on the source connector")
    return fitted


def defaults(struct_schema: dict) -> dict[str, Any]:
    """The fields' Connect ``default`` values, converted as their values are (fields without one
    are left out)."""
    out = {}
    for f in struct_schema.get("fields", []):
        if f.get("default") is not None:
            try:
                out[f["field"]] = _converter(f)(f["default"])
            except (ValueError, TypeError, KeyError, ArithmeticError):
                continue   # a default the column cannot hold is not applied
    return out


def arrow_field(schema: dict) -> pa.Field:
    """Every Delta column is nullable: a delete's row image and a dropped column carry nulls."""
    return pa.field(schema["field"], arrow_type(schema), nullable=True)


def arrow_schema(struct_schema: dict) -> pa.Schema:
    return pa.schema([arrow_field(f) for f in struct_schema.get("fields", [])])


def infer_type(value: Any) -> pa.DataType | None:
    """A column type for a schemaless (payload-only) value; None for null (type still unknown)."""
    if value is None or value is UNAVAILABLE:
        return None
    return pa.array([value]).type if not isinstance(value, bool) else pa.bool_()


def converter(schema: dict | None, placeholder: str = DEFAULT_PLACEHOLDER) -> Callable[[Any], Any]:
    """JSON value -> the Python value Arrow takes for :func:`arrow_type`; the TOAST placeholder
    becomes :data:`UNAVAILABLE`. ``schema`` None (payload only) keeps JSON values as they are."""
    toast = toast_test(placeholder)
    inner = _converter(schema) if schema is not None else (lambda v: v)
    general = _converter_with(toast, inner)
    # The common values skip the general test: an int is never a placeholder, a str only when it
    # is one of the placeholder strings.
    strings = toast.strings
    if inner is _integer:
        return lambda v: v if type(v) is int else general(v)
    if inner is _string or schema is None:
        return lambda v: (UNAVAILABLE if v in strings else v) if type(v) is str else general(v)
    return general


def toast_test(placeholder: str = DEFAULT_PLACEHOLDER) -> Callable[[Any], bool]:
    """Whether a JSON value is one of Debezium's unchanged-TOAST placeholders
    (``UnchangedToastedPlaceholder``): the string, its bytes in base64, ``[string]``, ``[base64]``,
    ``[UUID.nameUUIDFromBytes(bytes)]`` (``uuid[]``), the bytes as numbers (``int[]``, ``bigint[]``,
    ``date[]``; as floats for float arrays), the hstore ``{placeholder: placeholder}`` (a map, or its
    JSON string; ``[it]`` in an array), and Riverlog's source's shapes where Debezium has none: the
    VariableScaleDecimal ``{"scale": 0, "value": base64}`` (``numeric``; ``[it]`` in ``numeric[]``)
    and the bytes' bits, most significant first, as booleans (``bool[]``). A ``hex:`` placeholder is
    its hexadecimal octets, as Debezium reads it."""
    raw = bytes.fromhex(placeholder[4:]) if placeholder.startswith("hex:") else placeholder.encode()
    placeholder = raw.decode("utf-8", errors="replace")
    numbers = [b - 256 if b > 127 else b for b in raw]
    bits = [bool(b >> (7 - i) & 1) for b in raw for i in range(8)]
    b64 = base64.b64encode(raw).decode()
    objects = ({placeholder: placeholder}, {"scale": 0, "value": b64})
    strings = {placeholder, b64} | {json.dumps({placeholder: placeholder}, separators=(",", ":"), ensure_ascii=ascii)
                                    for ascii in (False, True)}   # Jackson writes non-ASCII as it is
    singles = strings | {str(uuid.UUID(bytes=hashlib.md5(raw).digest(), version=3))}

    def toast(v):
        if isinstance(v, str):
            return v in strings
        if isinstance(v, list):
            first = v[0] if len(v) == 1 else None
            if isinstance(first, (str, dict)):
                return first in singles if isinstance(first, str) else first in objects
            if v and isinstance(v[0], bool):
                return len(v) == len(bits) and all(isinstance(x, bool) for x in v) and v == bits
            return len(v) == len(numbers) and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                   for x in v) and v == numbers
        return isinstance(v, dict) and v in objects
    toast.strings = frozenset(strings)
    return toast


def _converter_with(toast: Callable[[Any], bool], inner: Callable[[Any], Any]) -> Callable[[Any], Any]:
    def convert(v):
        if v is None:
            return None
        if toast(v):
            return UNAVAILABLE
        return inner(v)
    return convert


def _converter(schema: dict) -> Callable[[Any], Any]:
    name, kind = schema.get("name"), schema.get("type")
    if name in _DATES:
        return lambda v: _DAY0 + dt.timedelta(days=int(v))
    if name in _TIMESTAMP_SCALE:
        scale = _TIMESTAMP_SCALE[name]
        return (lambda v: EPOCH + dt.timedelta(microseconds=int(v) // 1000)) if scale is None else (
            lambda v: EPOCH + dt.timedelta(microseconds=int(v) * scale))
    if name == _ZONED:
        return lambda v: dt.datetime.fromisoformat(v).astimezone(dt.timezone.utc)
    if name == _DECIMAL:
        precision, scale = _decimal_parameters(schema)
        type_ = decimal_type(precision, scale)
        plain = lambda v: _unscaled(v, scale) if isinstance(v, str) else decimal.Decimal(str(v))  # noqa: E731
        if (type_.precision, type_.scale) == (precision, scale):
            return plain
        declared = f"declared decimal({precision}, {scale})"
        return lambda v: fit_decimal(plain(v), type_, declared)
    if name == _VARIABLE:
        return _variable_scale
    if kind == "bytes":
        return lambda v: base64.b64decode(v, validate=True) if isinstance(v, str) else bytes(v)
    if kind == "struct":
        fields = [(f["field"], _nullable(_converter(f))) for f in schema.get("fields", [])]
        return lambda v: {n: c(v.get(n)) for n, c in fields} if isinstance(v, dict) else _struct_error(v)
    if kind == "array":
        return _array(_nullable(_converter(schema["items"])), schema.get("field"))
    if kind == "map":
        key, val = _nullable(_converter(schema["keys"])), _nullable(_converter(schema["values"]))
        return lambda v: [(key(k), val(x)) for k, x in (v.items() if isinstance(v, dict) else v)]
    if kind in ("int8", "int16", "int32", "int64"):
        return _integer
    if kind in ("float32", "float64"):
        return float
    if kind == "boolean":
        return _boolean
    if kind == "string":
        return _string
    raise ValueError(f"unknown Connect schema type {kind!r}")


def _array(item: Callable[[Any], Any], column: str | None) -> Callable[[Any], Any]:
    """An array's converter. A PostgreSQL array column holds values of any dimension whatever it
    declares, and Riverlog's source gives ``{{1,2},{3,4}}`` as nested lists (Debezium nulls each
    inner array); a Delta column has the schema's one dimension, so such a value is refused by name."""
    def convert(v):
        try:
            return [item(x) for x in v]
        except (ValueError, TypeError, KeyError, AttributeError, ArithmeticError) as e:
            if isinstance(v, list) and any(isinstance(x, list) for x in v):
                name = f"column {column!r}" if column else "an array field"
                raise ValueError(f"{name} holds a multi-dimensional array ({str(v)[:80]}), which its "
                                 "one-dimensional array schema (and so the Delta column) cannot hold: keep such "
                                 "values to one dimension, or exclude the column (column.exclude.list)") from e
            raise
    return convert


def _struct_error(v):
    raise ValueError(f"{str(v)[:80]} is not an object")


def _nullable(f):
    return lambda v: None if v is None else f(v)


def _integer(v):
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{v!r} is not an integer")
    return v


def _boolean(v):
    if not isinstance(v, bool):
        raise ValueError(f"{v!r} is not a boolean")
    return v


def _string(v):
    if not isinstance(v, str):
        raise ValueError(f"{v!r} is not a string")
    return v


def _unscaled(b64: str, scale: int) -> decimal.Decimal:
    unscaled = int.from_bytes(base64.b64decode(b64, validate=True), "big", signed=True)
    return decimal.Decimal(unscaled).scaleb(-scale)


def _variable_scale(v: dict) -> decimal.Decimal:
    return fit_decimal(_unscaled(v["value"], int(v["scale"])), _VARIABLE_SCALE, "a numeric without precision")


# ------------------------------------------------------------------------------ evolution
def widens(old: pa.DataType, new: pa.DataType) -> bool:
    """True when every value of ``old`` is a value of ``new`` (``new`` may hold the column)."""
    if old == new:
        return True
    ints = [pa.int8(), pa.int16(), pa.int32(), pa.int64()]
    if old in ints and new in ints:
        return ints.index(old) <= ints.index(new)
    if old in ints[:3] and new == pa.float64() or (old == pa.float32() and new == pa.float64()):
        return True
    if pa.types.is_decimal(old) and pa.types.is_decimal(new):
        return new.scale >= old.scale and new.precision - new.scale >= old.precision - old.scale
    if old == pa.date32() and pa.types.is_timestamp(new) and new.tz is None:
        return True
    if pa.types.is_null(old):
        return True
    if pa.types.is_struct(old) and pa.types.is_struct(new):
        new_fields = {f.name: f.type for f in new}
        return all(f.name in new_fields and widens(f.type, new_fields[f.name]) for f in old)
    if pa.types.is_list(old) and pa.types.is_list(new):
        return widens(old.value_type, new.value_type)
    return False


class Evolution:
    """The table schema after a batch: ``schema`` (target columns in place, new ones appended),
    ``added``, ``missing`` (kept: an update leaves them, an insert writes null), ``widened`` (the
    table is rewritten first)."""

    def __init__(self, schema: pa.Schema, added: list[str], missing: list[str], widened: list[str]):
        self.schema, self.added, self.missing, self.widened = schema, added, missing, widened


def evolve(table: str, target: pa.Schema | None, source: pa.Schema) -> Evolution:
    """Apply the module's policy; raise :class:`SchemaChangeError` naming the column and both types."""
    if target is None:
        return Evolution(source, list(source.names), [], [])
    fields, widened = [], []
    for f in target:
        if f.name not in source.names:
            fields.append(f)
            continue
        new = source.field(f.name).type
        if widens(new, f.type):
            fields.append(f)
        elif widens(f.type, new):
            fields.append(f.with_type(new))
            widened.append(f.name)
        else:
            raise SchemaChangeError(
                f"table {table!r}: column {f.name!r} changed from {f.type} to {new}, which is not a widening; "
                f"the Delta column cannot hold both. Rewrite the table under the new type (or drop it and "
                f"re-snapshot), or route the new column to a new name", table=table, column=f.name,
                old=str(f.type), new=str(new))
    added = [f for f in source if f.name not in target.names]
    return Evolution(pa.schema(fields + added), [f.name for f in added],
                     [n for n in target.names if n not in source.names], widened)


def to_arrow(table: str, rows: list[dict], schema: pa.Schema, coordinates: list[tuple]) -> pa.Table:
    """Rows (dicts of converted values) as a table of ``schema``; a value that does not fit its
    column raises :class:`PoisonRecordError` naming the record (``coordinates[i]`` = topic,
    partition, offset) and ``details["row"]``, the row's index."""
    try:
        return pa.Table.from_pylist(rows, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError, ValueError):
        pass
    for i, row in enumerate(rows):
        try:
            pa.Table.from_pylist([row], schema=schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError, ValueError) as e:
            topic, partition, offset = coordinates[i]
            raise PoisonRecordError(f"table {table!r}: record {topic}/{partition}@{offset} does not fit the "
                                    f"table's columns ({e})", topic=topic, partition=partition, offset=offset,
                                    row=i) from e
    raise AssertionError("unreachable: the rows converted one by one")
