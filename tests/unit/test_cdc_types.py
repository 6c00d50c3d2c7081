"""Column values as Debezium's PostgreSQL connector maps them, mode by mode; examples from its
documentation, properties against Python's own date and decimal arithmetic."""
from __future__ import annotations

import base64
from datetime import date, datetime, timedelta, timezone
from decimal import Context, Decimal

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from spark_source.postgres import types as T
from spark_source.postgres.types import CdcConfigError, TypeModes, ValueConversionError, column_type, convert_value

pytestmark = pytest.mark.unit

FAST = settings(max_examples=150, deadline=None, database=None)


def conv(oid, text, typmod=-1, **modes):
    return convert_value(column_type(oid, typmod, TypeModes(**modes)), text.encode(), "c", oid)


def schema(oid, typmod=-1, **modes):
    out = column_type(oid, typmod, TypeModes(**modes)).schema("c")
    return {k: v for k, v in out.items() if k not in ("optional", "field")}


def numeric_typmod(precision, scale):
    return ((precision << 16) | scale) + 4


def unscaled(b64: str) -> int:
    return int.from_bytes(base64.b64decode(b64), "big", signed=True)


def test_basic_types():
    assert (conv(T.BOOL, "t"), conv(T.BOOL, "f")) == (True, False)
    assert (conv(T.BOOL, "true"), conv(T.BOOL, "false")) == (True, False)   # boolean's ::text cast
    assert schema(T.INT2) == {"type": "int16"} and conv(T.INT2, "-7") == -7
    assert schema(T.INT4) == {"type": "int32"} and schema(T.INT8) == {"type": "int64"} and schema(T.OID) == {"type": "int64"}
    assert schema(T.FLOAT4) == {"type": "float32"} and conv(T.FLOAT8, "1.5") == 1.5
    assert [conv(T.FLOAT8, t) for t in ("NaN", "Infinity", "-Infinity")] == ["NaN", "Infinity", "-Infinity"]
    assert schema(T.VARCHAR, 259) == {"type": "string"} and conv(T.BPCHAR, "ab  ") == "ab  "
    assert schema(T.JSONB) == {"type": "string", "name": "io.debezium.data.Json", "version": 1}
    assert schema(T.UUID)["name"] == "io.debezium.data.Uuid" and schema(T.XML)["name"] == "io.debezium.data.Xml"
    assert conv(T.JSON, '{"a": 1}') == '{"a": 1}'
    assert schema(T.INET) == {"type": "string"} and conv(T.INET, "10.0.0.1/32") == "10.0.0.1/32"
    assert schema(424242) == {"type": "string"} and conv(424242, "happy") == "happy"   # an enum or user type


def test_bytea_by_binary_handling_mode():
    assert schema(T.BYTEA) == {"type": "bytes"} and conv(T.BYTEA, "\\xdeadbeef") == "3q2+7w=="
    assert conv(T.BYTEA, "\\xdeadbeef", binary_handling_mode="hex") == "deadbeef"
    assert schema(T.BYTEA, binary_handling_mode="base64") == {"type": "string"}
    assert conv(T.BYTEA, "\\xfbff", binary_handling_mode="base64-url-safe") == "-_8="
    with pytest.raises(ValueConversionError) as info:
        conv(T.BYTEA, "escape\\000format")
    assert "bytea_output=hex" in str(info.value) and info.value.details["column"] == "c"


def test_bits():
    assert schema(T.BIT, 1) == {"type": "boolean"} and conv(T.BIT, "1", 1) is True
    assert schema(T.BIT, 10) == {"type": "bytes", "name": "io.debezium.data.Bits", "version": 1,
                                 "parameters": {"length": "10"}}
    assert base64.b64decode(conv(T.BIT, "1000000001", 10)) == (0b1000000001).to_bytes(2, "little")


def test_numeric_precise_has_connect_decimal_with_scale_and_precision():
    assert schema(T.NUMERIC, numeric_typmod(10, 2)) == {
        "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
        "parameters": {"scale": "2", "connect.decimal.precision": "10"}}
    assert unscaled(conv(T.NUMERIC, "-1234.50", numeric_typmod(10, 2))) == -123450
    assert conv(T.NUMERIC, "NaN", numeric_typmod(10, 2)) is None


def test_numeric_without_scale_is_variable_scale_decimal():
    body = schema(T.NUMERIC)
    assert body["type"] == "struct" and body["name"] == "io.debezium.data.VariableScaleDecimal"
    assert [f["field"] for f in body["fields"]] == ["scale", "value"]
    value = conv(T.NUMERIC, "123.4500")      # Debezium strips trailing zeros, and a negative scale is 0
    assert value["scale"] == 2 and unscaled(value["value"]) == 12345
    assert [(v["scale"], unscaled(v["value"])) for v in (conv(T.NUMERIC, t) for t in ("0.000", "1200", "-0.0100"))] == \
        [(0, 0), (0, 1200), (2, -1)]


def test_special_numerics_bits_and_intervals_are_debeziums():
    """SpecialValueDecimal, convertBits (BitSet.toByteArray, always BYTES), PGInterval's fields."""
    assert [conv(T.NUMERIC, t, decimal_handling_mode="string") for t in ("NaN", "Infinity", "-Infinity")] == \
        ["NAN", "POSITIVE_INFINITY", "NEGATIVE_INFINITY"]
    assert [conv(T.NUMERIC, t, decimal_handling_mode="double") for t in ("NaN", "Infinity", "-Infinity")] == \
        ["NaN", "Infinity", "-Infinity"]
    assert conv(T.VARBIT, "00", 2) == "" and conv(T.BIT, "0000000000000001", 16) == "AQ=="
    assert conv(T.BIT, "1111111100000011", 16, binary_handling_mode="hex") == "A/8="
    assert schema(T.VARBIT, 1) == {"type": "boolean"} and conv(T.VARBIT, "1", 1) is True
    assert conv(T.INTERVAL, "-00:30:00", interval_handling_mode="string") == "P0Y0M0DT0H-30M0S"
    assert conv(T.INTERVAL, "-00:00:01.5", interval_handling_mode="string") == "P0Y0M0DT0H0M-1.5S"
    assert conv(T.INTERVAL, "178000000 years") == (1 << 63) - 1


def test_numeric_double_and_string_modes_and_money():
    assert schema(T.NUMERIC, decimal_handling_mode="double") == {"type": "float64"}
    assert conv(T.NUMERIC, "1.25", decimal_handling_mode="double") == 1.25
    assert conv(T.NUMERIC, "NaN", decimal_handling_mode="double") == "NaN"
    assert conv(T.NUMERIC, "1.2500", decimal_handling_mode="string") == "1.2500"
    assert conv(T.NUMERIC, "NaN", decimal_handling_mode="string") == "NAN"     # Debezium's constant
    assert schema(T.MONEY)["parameters"] == {"scale": "2"}
    assert unscaled(conv(T.MONEY, "-$1,234.56")) == -123456
    assert unscaled(conv(T.MONEY, "$7.5", money_fraction_digits=3)) == 7500
    assert conv(T.MONEY, "$1,234.56", decimal_handling_mode="string") == "1234.56"


@FAST
@given(st.integers(-10**30, 10**30), st.integers(0, 12))
@example(10**28 + 1, 0)
@example(-(10**29) - 7, 12)
@example(-128, 0)
@example(-(2**63), 2)
def test_precise_decimals_carry_the_exact_unscaled_value(unscaled_value, scale):
    text = str(Decimal(unscaled_value).scaleb(-scale, Context(prec=80)))   # exact, as PostgreSQL prints it
    fixed = conv(T.NUMERIC, text, numeric_typmod(38, scale))
    assert unscaled(fixed) == unscaled_value
    # the bytes are Java's BigInteger.toByteArray, as Debezium writes them: minimal, -128 in one byte
    minimal = len(base64.b64decode(fixed))
    assert minimal == 1 or unscaled_value >> (8 * minimal - 9) not in (0, -1)
    variable = conv(T.NUMERIC, text)
    assert Decimal(unscaled(variable["value"])).scaleb(-variable["scale"], Context(prec=80)) == Decimal(text)


def test_temporal_types_by_time_precision_mode():
    # Debezium's documented example: TIMESTAMP '2018-06-20 15:13:16.945104' is MicroTimestamp 1529507596945104
    assert conv(T.TIMESTAMP, "2018-06-20 15:13:16.945104") == 1529507596945104
    assert schema(T.TIMESTAMP)["name"] == "io.debezium.time.MicroTimestamp"
    assert schema(T.TIMESTAMP, 3) == {"type": "int64", "name": "io.debezium.time.Timestamp", "version": 1}
    assert conv(T.TIMESTAMP, "2018-06-20 15:13:16.945", 3) == 1529507596945
    assert schema(T.TIMESTAMP, time_precision_mode="connect")["name"] == "org.apache.kafka.connect.data.Timestamp"
    assert conv(T.TIMESTAMP, "2018-06-20 15:13:16.945104", time_precision_mode="connect") == 1529507596945
    assert schema(T.TIME, 3) == {"type": "int32", "name": "io.debezium.time.Time", "version": 1}
    assert conv(T.TIME, "10:00:00.5", 3) == 36_000_500
    assert schema(T.TIME) == {"type": "int64", "name": "io.debezium.time.MicroTime", "version": 1}
    assert conv(T.TIME, "10:00:00.000001") == 36_000_000_001
    assert schema(T.TIME, 3, time_precision_mode="adaptive_time_microseconds")["name"] == "io.debezium.time.MicroTime"
    assert conv(T.TIME, "24:00:00") == 86_400_000_000
    assert schema(T.TIME, time_precision_mode="connect")["name"] == "org.apache.kafka.connect.data.Time"
    assert schema(T.DATE) == {"type": "int32", "name": "io.debezium.time.Date", "version": 1}
    assert schema(T.DATE, time_precision_mode="connect")["name"] == "org.apache.kafka.connect.data.Date"
    assert conv(T.DATE, "1970-01-02") == 1 and conv(T.DATE, "0001-01-01 BC") == -719528   # year 0, a leap year


@FAST
@given(st.integers(1, 4713), st.dates(date(1, 1, 1), date(400, 12, 31)))
@example(4713, date(1, 12, 31))
@example(2, date(1, 1, 1))
def test_bc_dates_are_proleptic_gregorian_epoch_days(bc_year, day):
    """An independent oracle: the same month and day 400·k years later (a 400-year cycle is
    146,097 days) by Python's date; as java.time, which Debezium uses, counts them."""
    year = 1 - bc_year                     # astronomical: 1 BC is year 0
    if day.month == 2 and day.day == 29 and not (year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)):
        day = day.replace(day=28)
    cycles = (1 - year + 399) // 400
    shifted = date(year + 400 * cycles, day.month, day.day)
    expected = (shifted - date(1970, 1, 1)).days - 146_097 * cycles
    assert conv(T.DATE, f"{bc_year:04d}-{day.month:02d}-{day.day:02d} BC") == expected
    # Debezium's own test value (ts_min): the last microsecond of 4713 BC
    assert conv(T.TIMESTAMP, "4713-12-31 23:59:59.999999 BC") == -210831897600000001


def test_infinities():
    assert conv(T.TIMESTAMP, "infinity") == 9223372036825200000
    assert conv(T.TIMESTAMP, "-infinity") == -9223372036832400000
    # in a millisecond schema, the same instants in milliseconds (Timestamp.toEpochMillis)
    assert conv(T.TIMESTAMP, "infinity", 3) == 9223372036825200
    assert conv(T.TIMESTAMP, "-infinity", time_precision_mode="connect") == -9223372036832400
    assert conv(T.TIMESTAMPTZ, "infinity") == "infinity"


def test_zoned_values_are_utc_iso_strings():
    assert schema(T.TIMESTAMPTZ) == {"type": "string", "name": "io.debezium.time.ZonedTimestamp", "version": 1}
    assert conv(T.TIMESTAMPTZ, "2018-06-20 15:13:16.945104+02") == "2018-06-20T13:13:16.945104Z"
    assert conv(T.TIMESTAMPTZ, "2018-06-20 00:30:00+05:30") == "2018-06-19T19:00:00.000000Z"
    assert conv(T.TIMESTAMPTZ, "2018-06-20 15:13:16.5-03") == "2018-06-20T18:13:16.500000Z"
    # the fraction is as wide as the column's precision, the year as java.time writes it (Debezium's tests)
    assert conv(T.TIMESTAMPTZ, "2018-06-20 15:13:16.5-03", 3) == "2018-06-20T18:13:16.500Z"
    assert conv(T.TIMESTAMPTZ, "2018-06-20 15:13:16.5-03", 0) == "2018-06-20T18:13:16Z"
    assert conv(T.TIMESTAMPTZ, "21016-11-04 06:51:30+00") == "+21016-11-04T06:51:30.000000Z"
    assert conv(T.TIMESTAMPTZ, "4714-12-31 23:59:59.999999+00 BC") == "-4713-12-31T23:59:59.999999Z"
    assert conv(T.TIMESTAMPTZ, "0001-01-01 00:30:00+01") == "0000-12-31T23:30:00.000000Z"
    assert schema(T.TIMETZ)["name"] == "io.debezium.time.ZonedTime"
    assert conv(T.TIMETZ, "10:15:30+05:30") == "04:45:30Z"
    assert conv(T.TIMETZ, "23:15:30.25-02") == "01:15:30.25Z"


@FAST
@given(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)),
       st.integers(-15 * 60, 15 * 60).map(lambda m: m - m % 15))
def test_timestamps_and_dates_agree_with_python(moment, offset_minutes):
    text = moment.isoformat(sep=" ")
    epoch = datetime(1970, 1, 1)
    assert conv(T.TIMESTAMP, text) == (moment - epoch) // timedelta(microseconds=1)
    assert conv(T.DATE, moment.date().isoformat()) == (moment.date() - date(1970, 1, 1)).days
    sign = "+" if offset_minutes >= 0 else "-"
    zone = f"{sign}{abs(offset_minutes) // 60:02d}:{abs(offset_minutes) % 60:02d}"
    aware = moment.replace(tzinfo=timezone(timedelta(minutes=offset_minutes)))
    utc = aware.astimezone(timezone.utc).replace(tzinfo=None) if 1 < aware.astimezone(timezone.utc).year < 9999 else None
    if utc is not None:
        got = conv(T.TIMESTAMPTZ, text + zone)
        assert datetime.fromisoformat(got.replace("Z", "+00:00")).replace(tzinfo=None) == utc


def test_intervals():
    # Debezium's documented string form
    assert conv(T.INTERVAL, "1 year 2 mons 3 days 04:05:06.78", interval_handling_mode="string") == "P1Y2M3DT4H5M6.78S"
    assert schema(T.INTERVAL, interval_handling_mode="string")["name"] == "io.debezium.time.Interval"
    assert schema(T.INTERVAL) == {"type": "int64", "name": "io.debezium.time.MicroDuration", "version": 1}
    month = 365.25 / 12 * 86_400_000_000
    assert conv(T.INTERVAL, "1 mon") == int(month)
    assert conv(T.INTERVAL, "1 year 2 mons 3 days 04:05:06.78") == int((14 * 365.25 / 12 + 3) * 86_400_000_000
                                                                        + 14_706_780_000)
    assert conv(T.INTERVAL, "-1 days +02:00:00") == -86_400_000_000 + 7_200_000_000
    assert conv(T.INTERVAL, "-00:00:01.5") == -1_500_000
    assert conv(T.INTERVAL, "P1DT2H") == 93_600_000_000   # IntervalStyle=iso_8601 read too
    with pytest.raises(ValueConversionError):
        conv(T.INTERVAL, "1 fortnight")


def test_arrays():
    assert schema(1007) == {"type": "array", "items": {"type": "int32", "optional": True}}
    assert conv(1007, "{1,2,NULL}") == [1, 2, None]
    assert conv(1009, '{"a b","c\\"d",x,"NULL",""}') == ["a b", 'c"d', "x", "NULL", ""]
    assert conv(1007, "{{1,2},{3,4}}") == [[1, 2], [3, 4]]
    assert conv(1007, "{}") == [] and conv(1007, "[0:1]={5,6}") == [5, 6]
    assert conv(1185, '{"2020-01-01 00:00:00+00"}') == ["2020-01-01T00:00:00.000000Z"]
    items = schema(1231, numeric_typmod(5, 1))["items"]
    assert items["name"] == "org.apache.kafka.connect.data.Decimal" and items["parameters"]["scale"] == "1"
    assert unscaled(conv(1231, "{1.5}", numeric_typmod(5, 1))[0]) == 15


def test_toast_placeholder_by_schema_type():
    assert column_type(T.TEXT, -1).placeholder == "__debezium_unavailable_value"
    assert column_type(T.TEXT, -1, placeholder="??").placeholder == "??"
    assert base64.b64decode(column_type(T.BYTEA, -1).placeholder) == b"__debezium_unavailable_value"
    assert column_type(1009, -1).placeholder == ["__debezium_unavailable_value"]
    assert column_type(T.INT4, -1).placeholder is None


def test_bad_modes_are_refused_naming_the_option():
    with pytest.raises(CdcConfigError) as info:
        TypeModes(decimal_handling_mode="exact")
    assert "decimal.handling.mode='exact'" in str(info.value) and "precise, double, string" in str(info.value)
    with pytest.raises(CdcConfigError):
        TypeModes(time_precision_mode="nanos")


def test_unparseable_values_name_the_column_and_type():
    with pytest.raises(ValueConversionError) as info:
        convert_value(column_type(T.INT4, -1), b"twelve", "qty", T.INT4)
    assert info.value.code == 1354 and "'qty'" in str(info.value) and "'twelve'" in str(info.value)
