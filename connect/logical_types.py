"""Kafka Connect's logical types (Timestamp, Date, Time, Decimal) and bytes in Connect's JSON: the
type each travels as, and the column expressions that convert a payload to and from it, so that a
record is converted inside Spark's plan.

A Timestamp is an int64 of epoch ms, a Date an int32 of epoch days, a Time an int32 of ms of day,
a Decimal a number or base64 of the unscaled value (Java's ``BigInteger.toByteArray``), bytes
base64 (as Jackson writes a byte[]). Reading follows Kafka's ``JsonConverter.LOGICAL_CONVERTERS``:
a value of the wrong JSON kind reads as null, which the converter flags. Schemas and their Spark
types are in :mod:`connect.connect_types`.
"""
from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (ArrayType, BinaryType, DataType, DateType, DecimalType, IntegerType, LongType,
                               MapType, StringType, StructField, StructType, TimestampNTZType, TimestampType,
                               VariantType)

from connect.connect_types import is_time, needs

_UNSCALED = DecimalType(38, 0)


def is_logical(t):
    """Types whose JSON form is another type: epoch numbers, base64 strings."""
    return isinstance(t, (TimestampType, TimestampNTZType, DateType, DecimalType, BinaryType))


def wire_type(t: DataType, numeric: bool) -> DataType:
    """How a Spark type travels in Connect's JSON: timestamps as epoch ms, dates as epoch days,
    decimals as numbers or base64 strings."""
    if isinstance(t, (TimestampType, TimestampNTZType)):
        return LongType()
    if isinstance(t, DateType):
        return IntegerType()
    if isinstance(t, DecimalType):
        return t if numeric else StringType()
    if isinstance(t, BinaryType):
        return StringType()
    if isinstance(t, StructType):
        return StructType([StructField(f.name, wire_type(f.dataType, numeric)) for f in t.fields])
    if isinstance(t, ArrayType):
        return ArrayType(wire_type(t.elementType, numeric))
    if isinstance(t, MapType):
        return MapType(t.keyType, wire_type(t.valueType, numeric))
    return t


def _map_type(c: Column, t: DataType, leaf) -> Column:
    """Rebuild ``c`` of type ``t`` with ``leaf(col, type)`` applied where ``leaf`` returns a column."""
    if not needs(t, is_logical):
        return c
    if isinstance(t, StructType):
        return F.when(c.isNotNull(), F.struct(*[_map_type(c.getField(f.name), f.dataType, leaf).alias(f.name)
                                                for f in t.fields]))
    if isinstance(t, ArrayType):
        return F.transform(c, lambda x: _map_type(x, t.elementType, leaf))
    if isinstance(t, MapType):
        return F.transform_values(c, lambda _, v: _map_type(v, t.valueType, leaf))
    return leaf(c, t)


def _read_as_variant(t: DataType, meta: dict | None) -> bool:
    return isinstance(t, (TimestampType, TimestampNTZType, DateType, DecimalType)) or is_time(t, meta)


def _needs_read(t: DataType, meta: dict | None) -> bool:
    if _read_as_variant(t, meta) or isinstance(t, BinaryType):
        return True
    if isinstance(t, StructType):
        return any(_needs_read(f.dataType, f.metadata) for f in t.fields)
    if isinstance(t, ArrayType):
        return _needs_read(t.elementType, None)
    if isinstance(t, MapType):
        return _needs_read(t.valueType, None)
    return False


def read_type(t: DataType, meta: dict | None = None) -> DataType:
    """The type a JSON payload is first read into (``try_variant_get``) before :func:`from_wire`:
    bytes as base64 strings, and every logical type as the VARIANT leaf itself, so that its
    converter sees the JSON value's own kind (a number or a string for a Decimal, an integral
    number for Timestamp, Date and Time: Kafka's ``LOGICAL_CONVERTERS``) rather than a cast."""
    if _read_as_variant(t, meta):
        return VariantType()
    if isinstance(t, BinaryType):
        return StringType()
    if isinstance(t, StructType):
        return StructType([StructField(f.name, read_type(f.dataType, f.metadata)) for f in t.fields])
    if isinstance(t, ArrayType):
        return ArrayType(read_type(t.elementType))
    if isinstance(t, MapType):
        return MapType(t.keyType, read_type(t.valueType))
    return t


def exact_type(t: DataType) -> DataType:
    """The type ``from_json`` reads a payload into for the Decimal numbers a VARIANT holds only as
    doubles (exponent form, more than 38 digits): decimal leaves as decimal(38, s), read from the
    JSON text exactly (Jackson's ``decimalValue()``); every other leaf as a string, which never fails."""
    if isinstance(t, DecimalType):
        return t
    if isinstance(t, StructType):
        return StructType([StructField(f.name, exact_type(f.dataType)) for f in t.fields])
    if isinstance(t, ArrayType):
        return ArrayType(exact_type(t.elementType))
    if isinstance(t, MapType):
        return MapType(t.keyType, exact_type(t.valueType))
    return StringType()


_INTEGRAL = ("TINYINT", "SMALLINT", "INT", "BIGINT")
_INT_MIN, _INT_MAX = -(1 << 31), (1 << 31) - 1


def _kind(x: Column) -> Column:
    return F.call_function("schema_of_variant", x)


def _decimal_leaf(x: Column, t: DecimalType, exact: Column | None) -> Column:
    """Kafka's Decimal ``toConnect``: a JSON number is the decimal itself (whatever
    ``decimal.format`` says), a string is base64 of the unscaled bytes. Null (so the record is
    flagged) for anything else, for bad base64, and for a number with more fractional digits than
    ``t``'s scale: Kafka keeps such a BigDecimal as it is, Spark's decimal(38, s) would round it."""
    kind = _kind(x)
    text = F.try_variant_get(x, "$", "string")
    as_decimal = F.try_variant_get(x, "$", t.simpleString())
    decimal_kind = kind.startswith("DECIMAL")
    fraction = F.length(F.regexp_extract(text, r"\.(\d*?)0*$", 1))
    from_bytes = _decimal_from_bytes(F.try_to_binary(text, F.lit("base64")), t)
    out = F.when(kind == "STRING", from_bytes).when(kind.isin(*_INTEGRAL), as_decimal) \
        .when(decimal_kind & (fraction <= t.scale), as_decimal)
    if exact is not None:   # a double in the VARIANT: the exact value from the JSON text, if it lost nothing
        out = out.when(kind.isin("DOUBLE", "FLOAT") & (exact.cast("double") == F.try_variant_get(x, "$", "double")),
                       exact)
    return out


def _integral_leaf(x: Column, int32: bool) -> Column:
    """Kafka's Timestamp (``isIntegralNumber``), Date and Time (``isInt``) ``toConnect``: a JSON
    number with a fraction or an exponent is refused (null, so the record is flagged), not truncated."""
    n = F.try_variant_get(x, "$", "bigint")
    ok = _kind(x).isin(*_INTEGRAL)
    if int32:
        ok = ok & n.between(_INT_MIN, _INT_MAX)
    return F.when(ok, n)


def _map_read(c: Column, t: DataType, meta: dict | None, exact: Column | None) -> Column:
    if not _needs_read(t, meta):
        return c
    if isinstance(t, StructType):
        return F.when(c.isNotNull(), F.struct(*[
            _map_read(c.getField(f.name), f.dataType, f.metadata,
                      None if exact is None else exact.getField(f.name)).alias(f.name) for f in t.fields]))
    if isinstance(t, ArrayType):
        return F.transform(c, lambda x, i: _map_read(x, t.elementType, None, None if exact is None else exact[i]))
    if isinstance(t, MapType):
        return F.transform_values(c, lambda k, v: _map_read(v, t.valueType, None,
                                                            None if exact is None else exact[k]))
    if isinstance(t, (TimestampType, TimestampNTZType)):
        return timestamp_from_millis(_integral_leaf(c, False)).cast(t)
    if isinstance(t, DateType):
        return F.date_add(F.lit("1970-01-01").cast("date"), _integral_leaf(c, True).cast("int"))
    if is_time(t, meta):
        return _integral_leaf(c, True).cast("int")
    if isinstance(t, DecimalType):
        return _decimal_leaf(c, t, exact)
    if isinstance(t, BinaryType):   # Jackson's binaryValue(): base64, null (a mismatch) if it is not
        return F.try_to_binary(c, F.lit("base64"))
    return c


def _decimal_from_bytes(raw: Column, t: DecimalType) -> Column:
    """Java's ``new BigDecimal(new BigInteger(bytes), scale)``: big-endian two's complement of any
    length (leading sign bytes allowed). Null, which the converter reports as a mismatch, for no
    bytes or a value ``t`` cannot hold."""
    n, hexs = F.length(raw), F.hex(raw)
    negative = F.conv(hexs.substr(F.lit(1), F.lit(1)), 16, 10).cast("int") >= 8
    octets = F.transform(F.sequence(F.lit(1), n), lambda i: F.conv(hexs.substr(i * 2 - 1, F.lit(2)), 16, 10).cast("int"))
    # Horner in decimal(38,0) over the bytes, each inverted when negative: ~v = -v - 1 is the magnitude less one.
    zero = F.lit(0).cast(_UNSCALED)
    folded = F.aggregate(octets, zero, lambda acc, b: F.try_add(
        F.try_multiply(acc, F.lit(256)), F.when(negative, 255 - b).otherwise(b)).cast(_UNSCALED))
    magnitude = F.when(negative, F.try_add(folded, F.lit(1)).cast(_UNSCALED)).otherwise(folded)
    digits = magnitude.cast("string")
    sign = F.when(negative, F.lit("-")).otherwise(F.lit(""))
    if t.scale == 0:
        text = F.concat(sign, digits)
    else:   # the unscaled digits with the point put back: exact at any scale, unlike a decimal division
        padded = F.when(F.length(digits) > t.scale, digits).otherwise(F.lpad(digits, t.scale + 1, "0"))
        whole = F.length(padded) - t.scale
        text = F.concat(sign, padded.substr(F.lit(1), whole), F.lit("."), padded.substr(whole + 1, F.lit(t.scale)))
    return F.when(n > 0, text.try_cast(t))


def _decimal_to_base64(d: Column, t: DecimalType) -> Column:
    """Java's ``BigInteger.toByteArray`` of the unscaled value (minimal two's complement), base64,
    for the whole decimal(38) range: the unscaled digits are folded into four 32-bit limbs, nine
    digits at a time, in 64-bit arithmetic (a decimal division would round at scale 6)."""
    text = d.cast("string")   # plain digits; ``d < 0`` rounds -1E-38 to 0 when Spark widens decimal(38, 38)
    negative = text.startswith("-")
    magnitude = F.regexp_replace(text, "[-.]", "").cast(_UNSCALED)
    # two's complement of -m is the bits of m - 1 inverted
    w = F.when(negative, magnitude - F.lit(1)).otherwise(magnitude).cast(_UNSCALED)
    padded = F.lpad(w.cast("string"), 45, "0")
    chunks = F.transform(F.sequence(F.lit(0), F.lit(4)), lambda i: padded.substr(i * 9 + 1, F.lit(9)).cast("long"))
    limbs = ("l0", "l1", "l2", "l3")   # least significant first

    def times_1e9_plus(acc, chunk):
        out, carry = [], chunk
        for name in limbs:
            v = acc.getField(name) * F.lit(10 ** 9) + carry   # < 2^32 · 10^9 + 2^32: fits a long
            out.append(v.bitwiseAND(F.lit(0xFFFFFFFF)).alias(name))
            carry = F.shiftright(v, 32)
        return F.struct(*out)

    zero = F.struct(*[F.lit(0).cast("long").alias(name) for name in limbs])
    acc = F.aggregate(chunks, zero, times_1e9_plus)
    hexs = F.concat(*[F.lpad(F.hex(acc.getField(name)), 8, "0") for name in reversed(limbs)])
    hexs = F.when(negative, F.translate(hexs, "0123456789ABCDEF", "FEDCBA9876543210")).otherwise(hexs)
    trimmed = F.when(~negative, F.regexp_replace(hexs, "^(00)+(?=[0-7])", "")).otherwise(
        F.regexp_replace(hexs, "^(FF)+(?=[89A-F])", ""))
    return F.when(d.isNotNull(), _base64(F.unhex(trimmed)))


MAX_TIMESTAMP_MILLIS = (1 << 63) // 1000 - 1   # Spark keeps microseconds in a long (about year 294247)


def timestamp_from_millis(ms: Column) -> Column:
    """Spark's timestamp of epoch ``ms``; null past Spark's range, where ``timestamp_millis`` would
    fail the whole job (Java's ``Date`` holds any long)."""
    return F.when(ms.between(-MAX_TIMESTAMP_MILLIS, MAX_TIMESTAMP_MILLIS), F.timestamp_millis(ms))


def from_wire(c: Column, t: DataType, meta: dict | None = None, exact: Column | None = None) -> Column:
    """A payload read as :func:`read_type` converted to ``t``: logical types rebuilt from their
    JSON forms, null where the JSON value does not fit. ``exact``: the payload read as
    :func:`exact_type`, for Decimal numbers that a VARIANT holds only as doubles."""
    return _map_read(c, t, meta, exact)


def _base64(x: Column) -> Column:
    """Jackson's base64 of a byte[] (``MIME_NO_LINEFEEDS``): one line, where Spark's ``base64``
    breaks long output into CRLF-separated lines."""
    return F.regexp_replace(F.base64(x), "\r\n", "")


def to_wire(c: Column, t: DataType, numeric: bool) -> Column:
    def leaf(x, lt):
        if isinstance(lt, (TimestampType, TimestampNTZType)):
            return F.unix_millis(x.cast("timestamp"))
        if isinstance(lt, DateType):
            return F.unix_date(x)
        if isinstance(lt, DecimalType):
            return x if numeric else _decimal_to_base64(x, lt)
        if isinstance(lt, BinaryType):
            return _base64(x)
        return x
    return _map_type(c, t, leaf)
