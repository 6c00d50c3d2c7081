"""PostgreSQL column values (pgoutput's text format) as Debezium's JSON values and Connect schemas.

Each column gets a :class:`ColumnType` from its type oid and type modifier (both from the Relation
message) and the connector's modes (:mod:`spark_source.postgres.type_modes`);
``ColumnType.schema(field, optional)`` is the Kafka Connect schema as JsonConverter writes it,
``ColumnType.convert(text)`` the JSON value, both as Debezium's PostgreSQL connector gives them:

- ``decimal.handling.mode``: ``precise`` (Connect ``Decimal``, base64 of the unscaled two's
  complement; ``io.debezium.data.VariableScaleDecimal``, trailing zeros stripped, when the column
  has no scale), ``double``, ``string``. NaN and ±Infinity are null under ``precise`` in a
  nullable column (Debezium's ``SpecialValueDecimal.fromLogical`` throws for them in any column,
  stopping the connector), ``NaN``/``Infinity``/``-Infinity`` under ``double``,
  ``NAN``/``POSITIVE_INFINITY``/``NEGATIVE_INFINITY`` under ``string``. Bit strings are Debezium's
  ``Bits`` bytes whatever ``binary.handling.mode`` says (``bit(1)``/``varbit(1)``: boolean). A
  required (NOT NULL) column cannot be null, so there the envelope refuses NaN/Infinity under
  ``precise`` with a :class:`ValueConversionError` naming ``decimal.handling.mode=string``, as
  Debezium cannot write that event either.
- ``time.precision.mode``: ``adaptive`` (Time/MicroTime and Timestamp/MicroTimestamp by the
  column's precision), ``adaptive_time_microseconds`` (every time as MicroTime), ``connect``
  (Connect's Date/Time/Timestamp, milliseconds).
- ``binary.handling.mode``: ``bytes`` (base64 in JSON, as JsonConverter writes BYTES), ``base64``,
  ``base64-url-safe``, ``hex`` (strings); ``interval.handling.mode``: ``numeric`` (MicroDuration,
  365.25/12 days a month, in Debezium's double arithmetic) or ``string`` (ISO-8601
  ``P1Y2M3DT4H5M6.78S``); an infinite interval is the int64 range's end, or ``infinity``.
- timestamptz/timetz become UTC ISO-8601 strings (ZonedTimestamp/ZonedTime): a timestamptz's
  fraction as wide as the column's precision (6 without one: ``…T11:51:02.000000Z``, as Debezium
  since 2.2), a timetz's as many digits as needed. Arrays become JSON arrays of their element's
  value; a ``time[]``'s elements are MicroTime whatever the precision (Debezium's ``TIME_ARRAY``).
- a date's ``infinity``/``-infinity`` are the days of Debezium's ``POSITIVE_INFINITY_LOCAL_DATE``
  / ``NEGATIVE_INFINITY_LOCAL_DATE`` (see temporal.py).
- a domain converts as its root type, with the nearest modifier (``TypeRegistry.root``); enums,
  ``hstore`` (``hstore.handling.mode``), ``ltree`` and ``point`` take Debezium's shapes
  (special_types.py); ranges, ``citext``, other geometric and unknown types are strings, their
  arrays arrays of strings.

The text format depends on the walsender session: the values are parsed for ``DateStyle=ISO``,
``IntervalStyle=postgres`` (``iso_8601`` is read too) and ``bytea_output=hex``, PostgreSQL's
defaults; the time zone may be anything (the offset is in the value). The snapshot reads each
value through its type's output function too (snapshot.py), so a row converts the same either way.
"""
from __future__ import annotations

import base64
import math
import re
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation
from typing import Any, Callable

from broker.errors import RiverlogError
from spark_source.postgres import special_types, temporal
from spark_source.postgres.type_modes import PLACEHOLDER, CdcConfigError, TypeModes  # noqa: F401
from spark_source.postgres.type_modes import placeholder_bytes, placeholder_text

BOOL, BYTEA, CHAR, NAME, INT8, INT2, INT4, TEXT, OID, JSON, XML = 16, 17, 18, 19, 20, 21, 23, 25, 26, 114, 142
FLOAT4, FLOAT8, MONEY, BPCHAR, VARCHAR, DATE, TIME, TIMESTAMP, TIMESTAMPTZ = 700, 701, 790, 1042, 1043, 1082, 1083, 1114, 1184
INTERVAL, TIMETZ, BIT, VARBIT, NUMERIC, UUID, JSONB = 1186, 1266, 1560, 1562, 1700, 2950, 3802
INET, CIDR, MACADDR, MACADDR8 = 869, 650, 829, 774
INT4RANGE, NUMRANGE, TSRANGE, TSTZRANGE, DATERANGE, INT8RANGE = 3904, 3906, 3908, 3910, 3912, 3926

VARIABLE_SCALE = "io.debezium.data.VariableScaleDecimal"

ARRAY_ELEMENT = {1000: BOOL, 1001: BYTEA, 1002: CHAR, 1003: NAME, 1005: INT2, 1007: INT4, 1009: TEXT,
                 1014: BPCHAR, 1015: VARCHAR, 1016: INT8, 1021: FLOAT4, 1022: FLOAT8, 1028: OID, 199: JSON,
                 143: XML, 791: MONEY, 1182: DATE, 1183: TIME, 1115: TIMESTAMP, 1185: TIMESTAMPTZ,
                 1187: INTERVAL, 1270: TIMETZ, 1561: BIT, 1563: VARBIT, 1231: NUMERIC, 2951: UUID, 3807: JSONB,
                 1041: INET, 651: CIDR, 1040: MACADDR, 775: MACADDR8, 3905: INT4RANGE, 3907: NUMRANGE,
                 3909: TSRANGE, 3911: TSTZRANGE, 3913: DATERANGE, 3927: INT8RANGE}


class ValueConversionError(RiverlogError):
    """A column's text value does not parse as its type says (``details``: column, type_oid, value).
    Usually a session setting the walsender was started with (DateStyle, bytea_output) differs
    from PostgreSQL's default."""
    code, name, retriable, grpc_status = 1354, "CDC_VALUE_CONVERSION", False, "INVALID_ARGUMENT"


@dataclass(frozen=True)
class ColumnType:
    """A column's Connect schema (without ``field``/``optional``) and its text -> JSON conversion."""
    schema_body: dict
    convert: Callable[[str], Any]
    placeholder: Any = None
    """An unchanged TOASTed value's stand-in; None where no value of the schema can be one (a
    float), so such an event is refused (``envelope.py``) rather than carry a null."""
    fallback: Any = None
    """A required field's value when none was sent (a delete's ``before`` under REPLICA IDENTITY
    DEFAULT); None: the zero of its schema (``debezium_schemas.fallback``). Set where Debezium's
    converter has a fallback of its own: a decimal or money under ``decimal.handling.mode=string``
    (``"0.00"``), an hstore under ``hstore.handling.mode=json`` (``"{}"``)."""

    def schema(self, field: str, optional: bool = True) -> dict:
        out = dict(self.schema_body)
        out["optional"] = optional
        out["field"] = field
        # JsonConverter's order: type, (fields|items), optional, name, version, doc, parameters, field
        return _ordered(out)


_KEY_ORDER = ("type", "fields", "items", "keys", "values", "optional", "name", "version", "doc", "parameters", "default", "field")


def _ordered(schema: dict) -> dict:
    return {k: schema[k] for k in _KEY_ORDER if k in schema} | {k: v for k, v in schema.items() if k not in _KEY_ORDER}


def _plain(kind: str) -> dict:
    return {"type": kind}


def _named(kind: str, name: str, **extra) -> dict:
    return {"type": kind, "name": name, "version": 1, **extra}


def column_type(type_oid: int, type_modifier: int, modes: TypeModes = TypeModes(),
                placeholder: str = PLACEHOLDER, registry=None) -> ColumnType:
    """The Connect schema and converter for one column (``type_modifier`` -1 = none).
    ``registry`` (a :class:`~spark_source.postgres.type_registry.TypeRegistry`) resolves the
    types that are not built in; without it they are strings."""
    if registry is not None:
        type_oid, type_modifier = registry.root(type_oid, type_modifier)
    element = ARRAY_ELEMENT.get(type_oid) or (registry.element(type_oid) if registry is not None else 0)
    if element:
        if element == TIME:   # Debezium's TIME_ARRAY: array(MicroTime) whatever the precision
            modes = replace(modes, time_precision_mode="adaptive_time_microseconds")
        inner = column_type(element, type_modifier, modes, placeholder, registry)
        item_schema = _ordered({**inner.schema_body, "optional": True})
        return ColumnType({"type": "array", "items": item_schema}, lambda text: _parse_array(text, inner.convert),
                          array_placeholder(element, inner, placeholder))
    special = special_types.special(type_oid, modes.hstore_handling_mode, placeholder_text(placeholder), registry)
    if special is not None:
        return ColumnType(*special)
    body, convert = _scalar(type_oid, type_modifier, modes)
    kind = body["type"]
    # BYTES is base64 in JSON whatever binary.handling.mode says (Bits are BYTES in every mode)
    fill = placeholder_text(placeholder) if kind == "string" else _b64(placeholder_bytes(placeholder)) \
        if kind == "bytes" else variable_scale_placeholder(placeholder) if body.get("name") == VARIABLE_SCALE \
        else None
    return ColumnType(body, convert, fill, _zero_text(type_oid, type_modifier, modes))


def _zero_text(oid: int, typmod: int, modes: TypeModes) -> Any:
    """A required decimal's fallback under ``decimal.handling.mode=string``: Debezium's zero at the
    column's scale (``toPlainString`` of ``withScaleAdjustedIfNeeded(ZERO)``: ``"0.00"`` for a
    ``numeric(6,2)``, ``"0"`` unconstrained) or, for money, ``BigDecimal.ZERO.setScale(
    money.fraction.digits).toString()``; None (the schema's zero) otherwise."""
    if modes.decimal_handling_mode != "string" or oid not in (NUMERIC, MONEY):
        return None
    if oid == MONEY:
        scale = modes.money_fraction_digits
        if scale > 6:    # BigDecimal.toString of a zero whose adjusted exponent is below -6
            return f"0E-{scale}"
    else:
        scale = (typmod - 4) & 0xFFFF if typmod >= 4 else 0
    return "0." + "0" * scale if scale > 0 else "0"


def array_placeholder(element_oid: int, inner: ColumnType, placeholder: str = PLACEHOLDER) -> Any:
    """An unchanged TOASTed array's value, as Debezium's ``UnchangedToastedPlaceholder`` makes it, so
    it fits the array's schema and a sink can tell it from data: ``uuid[]`` ->
    ``[UUID.nameUUIDFromBytes(placeholder)]``; integer elements (``int2``/``int4``/``int8``/``date``
    arrays and the other integer-typed ones) -> the placeholder's bytes as (signed) numbers; float
    elements -> the same numbers as floats; boolean elements (``bool[]``, ``bit(1)[]``) -> the
    bytes' bits, most significant first; any other element -> ``[its placeholder]`` (string and
    bytes elements, ``numeric[]``'s VariableScaleDecimal, an hstore). Where Debezium has no such
    value it fails the event or writes null, which a sink would apply over the real value."""
    raw = placeholder_bytes(placeholder)
    kind = inner.schema_body["type"]
    if element_oid == UUID:
        return [toast_uuid(placeholder)]
    if kind in ("int8", "int16", "int32", "int64"):
        return [b - 256 if b > 127 else b for b in raw]   # Java's (int) of a byte
    if kind in ("float32", "float64"):
        return [float(b - 256 if b > 127 else b) for b in raw]
    if kind == "boolean":
        return [bool(b >> (7 - i) & 1) for b in raw for i in range(8)]
    return [inner.placeholder] if inner.placeholder is not None else None


def variable_scale_placeholder(placeholder: str = PLACEHOLDER) -> dict:
    """An unchanged TOASTed ``numeric`` without a scale under ``decimal.handling.mode=precise``: a
    VariableScaleDecimal of scale 0 whose unscaled bytes are the placeholder's. The default's 28
    bytes are a 67-digit integer, beyond what a sink's decimal holds, so no stored value is taken
    for it."""
    return {"scale": 0, "value": _b64(placeholder_bytes(placeholder))}


def toast_uuid(placeholder: str = PLACEHOLDER) -> str:
    """Java's ``UUID.nameUUIDFromBytes(placeholder bytes)``: an MD5 name-based (version 3) UUID."""
    import hashlib
    import uuid
    return str(uuid.UUID(bytes=hashlib.md5(placeholder_bytes(placeholder)).digest(), version=3))


def _scalar(oid: int, typmod: int, modes: TypeModes) -> tuple:
    if oid == BOOL:   # the output function's 't'/'f'; 'true'/'false' (a ::text cast) read too
        return _plain("boolean"), lambda t: t in ("t", "true")
    if oid == INT2:
        return _plain("int16"), int
    if oid == INT4:
        return _plain("int32"), int
    if oid in (INT8, OID):
        return _plain("int64"), int
    if oid == FLOAT4:
        return _plain("float32"), _float
    if oid == FLOAT8:
        return _plain("float64"), _float
    if oid in (NUMERIC, MONEY):
        return _decimal(oid, typmod, modes)
    if oid == BYTEA:
        kind = "bytes" if modes.binary_handling_mode == "bytes" else "string"
        return _plain(kind), lambda t: bytes_json(_unhex(t), modes)
    if oid in (JSON, JSONB):
        return _named("string", "io.debezium.data.Json"), str
    if oid == XML:
        return _named("string", "io.debezium.data.Xml"), str
    if oid == UUID:
        return _named("string", "io.debezium.data.Uuid"), str
    if oid == DATE:
        name = "org.apache.kafka.connect.data.Date" if modes.time_precision_mode == "connect" else "io.debezium.time.Date"
        return _named("int32", name), temporal.date_days
    if oid == TIME:
        return _time(typmod, modes)
    if oid == TIMESTAMP:
        return _timestamp(typmod, modes)
    if oid == TIMESTAMPTZ:
        scale = min(typmod, 6) if typmod >= 0 else 6
        return _named("string", "io.debezium.time.ZonedTimestamp"), lambda t: temporal.zoned_timestamp(t, scale)
    if oid == TIMETZ:
        return _named("string", "io.debezium.time.ZonedTime"), temporal.zoned_time
    if oid == INTERVAL:
        if modes.interval_handling_mode == "string":
            return _named("string", "io.debezium.time.Interval"), temporal.iso_interval
        return _named("int64", "io.debezium.time.MicroDuration"), temporal.micro_duration
    if (oid == BIT and typmod in (1, -1)) or (oid == VARBIT and typmod == 1):
        return _plain("boolean"), lambda t: t == "1"
    if oid in (BIT, VARBIT):   # BYTES whatever binary.handling.mode says, as Debezium's convertBits
        length = typmod if typmod > 0 else 2 ** 31 - 1
        return (_named("bytes", "io.debezium.data.Bits", parameters={"length": str(length)}),
                lambda t: _b64(_bits(t)))
    return _plain("string"), str


def _float(text: str) -> Any:
    value = float(text)
    if math.isnan(value) or math.isinf(value):
        return text if text in ("NaN", "Infinity", "-Infinity") else str(value)
    return value


def _decimal(oid: int, typmod: int, modes: TypeModes) -> tuple:
    if oid == MONEY:
        scale, precision = modes.money_fraction_digits, None
        parse = _money
    else:
        precision, scale = ((typmod - 4) >> 16 & 0xFFFF, (typmod - 4) & 0xFFFF) if typmod >= 4 else (None, None)
        parse = Decimal
    mode = modes.decimal_handling_mode
    if mode == "double":
        return _plain("float64"), lambda t: _nan_or(parse(t), _double, "NaN", "Infinity", "-Infinity")
    if mode == "string":
        return _plain("string"), lambda t: _nan_or(parse(t), lambda d: str(d) if oid == MONEY else t, "NAN",
                                                   "POSITIVE_INFINITY", "NEGATIVE_INFINITY")
    if scale is None:
        body = {"type": "struct", "fields": [{"type": "int32", "optional": False, "field": "scale"},
                                             {"type": "bytes", "optional": False, "field": "value"}],
                "name": VARIABLE_SCALE, "version": 1, "doc": "Variable scaled decimal"}
        return body, lambda t: _nan_or(parse(t), _variable_scale, None)
    params = {"scale": str(scale)}
    if precision is not None:
        params["connect.decimal.precision"] = str(precision)
    body = _named("bytes", "org.apache.kafka.connect.data.Decimal", parameters=params)
    return body, lambda t: _nan_or(parse(t), lambda d: _b64(_unscaled(d, scale)), None)


def _double(value: Decimal) -> Any:
    """``BigDecimal.doubleValue``: a numeric beyond the double range is ±Infinity, which JSON has
    only as the strings JsonConverter (Jackson) writes for it, as a float8's."""
    out = float(value)
    return out if not math.isinf(out) else ("Infinity" if out > 0 else "-Infinity")


def _nan_or(value: Decimal, convert: Callable, nan: Any, pos: Any = None, neg: Any = None) -> Any:
    """NaN and ±Infinity (PostgreSQL 14's numeric) as Debezium's SpecialValueDecimal writes them."""
    if value.is_nan():
        return nan
    if value.is_infinite():
        return neg if value < 0 else pos
    return convert(value)


def _money(text: str) -> Decimal:
    negative = "-" in text or text.startswith("(")
    digits = re.sub(r"[^0-9.]", "", text)
    return -Decimal(digits) if negative else Decimal(digits)


def _unscaled(value: Decimal, scale: int) -> bytes:
    """Big-endian two's complement of ``value * 10**scale``, exact (Decimal's context would round)."""
    sign, digits, exponent = value.as_tuple()
    # Decimal's own int() (no decimal string in between: a numeric may have far more digits than
    # int(str) accepts, 4300 by default)
    magnitude = int(Decimal((0, digits, 0)))
    shift = exponent + scale
    magnitude = magnitude * 10 ** shift if shift >= 0 else (magnitude + 10 ** -shift // 2) // 10 ** -shift
    unscaled = -magnitude if sign else magnitude
    return java_bytes(unscaled)


def java_bytes(n: int) -> bytes:
    """Java's ``BigInteger.toByteArray``: the minimal big-endian two's complement (-128 is one byte)."""
    return n.to_bytes((n if n >= 0 else ~n).bit_length() // 8 + 1, "big", signed=True)


def _variable_scale(value: Decimal) -> dict:
    """Debezium's VariableScaleDecimal: trailing zeros stripped (``stripTrailingZeros``), a
    negative scale made 0, so ``123.4500`` is scale 2 and ``0.000`` scale 0."""
    _, digits, exponent = value.as_tuple()
    digits = "".join(map(str, digits)).lstrip("0")
    zeros = len(digits) - len(digits.rstrip("0")) if digits else -exponent
    scale = max(0, -exponent - zeros) if digits else 0
    return {"scale": scale, "value": _b64(_unscaled(value, scale))}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def bytes_json(data: bytes, modes: TypeModes) -> str:
    mode = modes.binary_handling_mode
    if mode == "hex":
        return data.hex()
    if mode == "base64-url-safe":
        return base64.urlsafe_b64encode(data).decode("ascii")
    return _b64(data)


def _unhex(text: str) -> bytes:
    if not text.startswith("\\x"):
        raise ValueError("bytea is not in hex output format (set bytea_output=hex)")
    return bytes.fromhex(text[2:])


def _bits(text: str) -> bytes:
    """Debezium's Bits (``BitSet.toByteArray``): the bit string as an integer, little-endian, as
    many bytes as its highest set bit needs (none for all zeros)."""
    n = int(text or "0", 2)
    return n.to_bytes((n.bit_length() + 7) // 8, "little")


def _time(typmod: int, modes: TypeModes) -> tuple:
    precision = typmod if typmod >= 0 else 6
    mode = modes.time_precision_mode
    if mode == "connect":
        return _named("int32", "org.apache.kafka.connect.data.Time"), lambda t: temporal.time_micros(t) // 1000
    if mode == "adaptive" and precision <= 3:
        return _named("int32", "io.debezium.time.Time"), lambda t: temporal.time_micros(t) // 1000
    return _named("int64", "io.debezium.time.MicroTime"), temporal.time_micros


def _timestamp(typmod: int, modes: TypeModes) -> tuple:
    precision = typmod if typmod >= 0 else 6
    if modes.time_precision_mode == "connect":
        return _named("int64", "org.apache.kafka.connect.data.Timestamp"), lambda t: _floor_ms(temporal.timestamp_micros(t))
    if precision <= 3:
        return _named("int64", "io.debezium.time.Timestamp"), lambda t: _floor_ms(temporal.timestamp_micros(t))
    return _named("int64", "io.debezium.time.MicroTimestamp"), temporal.timestamp_micros


def _floor_ms(micros: int) -> int:
    """Milliseconds, ±infinity too: Debezium's infinity instants in a millisecond schema."""
    return micros // 1000


def _parse_array(text: str, convert: Callable[[str], Any]) -> list:
    """PostgreSQL's array literal (``{1,2,NULL}``, ``{"a b","c\\"d"}``, ``{{1,2},{3,4}}``)."""
    pos = text.index("{") if not text.startswith("{") else 0   # '[1:2]={..}' carries bounds first

    def parse(i: int) -> tuple:
        assert text[i] == "{"
        out, i = [], i + 1
        if text[i] == "}":
            return out, i + 1
        while True:
            if text[i] == "{":
                value, i = parse(i)
                out.append(value)
            elif text[i] == '"':
                chars, i = [], i + 1
                while text[i] != '"':
                    if text[i] == "\\":
                        i += 1
                    chars.append(text[i])
                    i += 1
                out.append(convert("".join(chars)))
                i += 1
            else:
                end = i
                while text[end] not in ",}":
                    end += 1
                token = text[i:end].strip()
                out.append(None if token == "NULL" else convert(token))
                i = end
            if text[i] == "}":
                return out, i + 1
            i += 1  # ','

    return parse(pos)[0]


def convert_value(ctype: ColumnType, raw: Any, column: str = "?", type_oid: int = 0) -> Any:
    """One TupleData value (text bytes, None) to JSON, with the error naming the column."""
    if raw is None:
        return None
    text = raw.decode("utf-8") if isinstance(raw, (bytes, bytearray)) else str(raw)
    try:
        return ctype.convert(text)
    except (ValueError, IndexError, AssertionError, InvalidOperation, OverflowError, TypeError) as e:
        raise ValueConversionError(f"column {column!r} (type oid {type_oid}): cannot convert {text[:80]!r}: {e}",
                                   column=column, type_oid=type_oid, value=text[:200]) from None
