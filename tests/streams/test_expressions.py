"""Unit tests of :mod:`streams.expressions` (no Spark): Spark's types, ANSI errors and naming
rules as the oracle test found them in Spark 4.2."""
from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal

import pytest

from streams.expressions import (Expression, ExpressionEvaluationError, UnsupportedExpressionError,
                                 expression)
from streams.sql_values import double_str

pytestmark = pytest.mark.unit

TS = datetime(2024, 3, 4, 5, 6, 7, 123456, tzinfo=timezone.utc)
ROW = {"key": "k", "value": {"user": "ann", "amount": 2.5, "n": 3, "z": None, "tags": ["a", "b"],
                            "name": {"First": "Ann"}}, "timestamp": TS, "topic": "orders", "partition": 0,
       "offset": 7, "headers": []}


def ev(text, row=ROW):
    return expression(text).evaluate(row)


@pytest.mark.parametrize("text, want", [
    ("value.amount * 1.2", 3.0),                       # double * decimal literal: DOUBLE
    ("value.n * 1.2", Decimal("3.6")),                 # bigint * decimal literal: DECIMAL(23,1)
    ("1.0 / 3", Decimal("0.333333")),                  # DECIMAL(7,6): the literal 3 counts as DECIMAL(1,0)
    ("7 / 2", 3.5), ("7 div 2", 3), ("-7 % 3", -1), ("7 % -3", 1),
    ("round(2.5)", Decimal("3")), ("round(-2.5)", Decimal("-3")), ("round(value.amount)", 3.0),
    ("coalesce(null, 1, 2.5)", Decimal("1.0")), ("value.z + 1", None), ("null and false", False),
    ("null or true", True), ("2 in (1, null)", None), ("value.user like 'a_n'", True),
    ("cast(1e10 as string)", "1.0E10"), ("cast(0.0001e0 as string)", "1.0E-4"),
    ("cast(timestamp as string)", "2024-03-04 05:06:07.123456"), ("cast(' 12 ' as int)", 12),
    ("value.name.first", "Ann"),                       # struct fields resolve case-insensitively
    ("`value`.`user`", "ann"), ("topic", "orders"), ("offset + 1", 8), ("value.missing", None),
    ("element_at(value.tags, -1)", "b"), ("value.tags[0]", "a"), ("size(value.tags)", 2),
    ("split('a.b', '.')", ["", "", "", ""]),           # the pattern is a Java regex
    ("date_format(timestamp, 'yyyy-MM-dd HH:mm:ss.SSS')", "2024-03-04 05:06:07.123"),
    ("unix_timestamp(timestamp)", 1709528767),
])
def test_values_are_spark_values(text, want):
    got = ev(text)
    assert got == want and type(got) is type(want)


def test_struct_fields_are_named_as_spark_names_them():
    got = ev("struct(value.user, value.amount * 1.2, value.n + 1, key, upper(key), value.n AS m)")
    assert list(got) == ["user", "col2", "col3", "key", "col5", "m"]
    assert ev("named_struct('x', value.n, 'y', 1.2)") == {"x": 3, "y": Decimal("1.2")}


@pytest.mark.parametrize("text, error_class", [
    ("1 / 0", "DIVIDE_BY_ZERO"), ("value.amount / 0", "DIVIDE_BY_ZERO"), ("value.n % 0", "REMAINDER_BY_ZERO"),
    ("2147483647 + 1", "ARITHMETIC_OVERFLOW"), ("cast('abc' as int)", "CAST_INVALID_INPUT"),
    ("cast('12.7' as int)", "CAST_INVALID_INPUT"), ("cast(300 as tinyint)", "CAST_OVERFLOW"),
    ("element_at(value.tags, 5)", "INVALID_ARRAY_INDEX_IN_ELEMENT_AT"), ("value.tags[5]", "INVALID_ARRAY_INDEX"),
    ("value.user + 1", "CAST_INVALID_INPUT"), ("value.amount div 2", "DATATYPE_MISMATCH"),
])
def test_ansi_errors_are_typed(text, error_class):
    with pytest.raises(ExpressionEvaluationError) as e:
        ev(text)
    assert e.value.details["error_class"] == error_class
    assert text in str(e.value) and e.value.code == 1202 and not e.value.retriable


BIG = {"value": {"a": 2**62, "b": -(2**62), "n": 3}}


@pytest.mark.parametrize("text, overflows", [
    # Spark's ReorderAssociativeOperator runs an integral + or * chain with constants in it as its
    # other operands first, then the constants: (a + a) + -3, which overflows where a + (a - 3) does not.
    ("value.a + (value.a + -3)", True), ("(value.a + -3) + value.a", True), ("3 + value.a + value.a + -7", True),
    ("value.a * (2 * value.n)", True), ("value.a + (value.a + (value.b + -3))", True),
    # Subtraction is not reordered; a chain without constants runs as written.
    ("(value.a - 3) + value.a", False), ("value.a + (value.a + value.b)", False), ("value.a + -3", False),
])
def test_an_integral_chain_overflows_where_sparks_reordered_plan_does(text, overflows):
    if overflows:
        with pytest.raises(ExpressionEvaluationError) as e:
            expression(text).evaluate(BIG)
        assert e.value.details["error_class"] == "ARITHMETIC_OVERFLOW"
    else:
        a, b = 2**62, -(2**62)
        assert expression(text).evaluate(BIG) == {"(value.a - 3) + value.a": 2 * a - 3,
                                                  "value.a + (value.a + value.b)": a, "value.a + -3": a - 3}[text]
    # The value does not change where nothing overflows.
    assert expression(text).evaluate({"value": {"a": 10, "b": -4, "n": 3}}) == \
        expression(text.replace("value.a", "10").replace("value.b", "(-4)").replace("value.n", "3")).evaluate({})


def test_try_cast_gives_null_instead():
    assert ev("try_cast(value.user as int)") is None


@pytest.mark.parametrize("text", ["foo(value.n)", "rand()", "value.*", "nosuch + 1", "x IN (SELECT 1)",
                                  "current_timestamp()", "1.5e0 div 2", "cast(value.n as float)", "((("])
def test_what_cannot_be_evaluated_fails_when_read(text):
    with pytest.raises(UnsupportedExpressionError) as e:
        expression(text)
    assert "use a Python callable instead" in str(e.value) and e.value.code == 1201


def test_compiled_once_and_immutable():
    e = expression("value.amount > 2")
    assert isinstance(e, Expression) and e.text == "value.amount > 2" and str(e) == e.text
    assert [e.evaluate({"value": {"amount": a}}) for a in (1.0, 3.0, None)] == [False, True, None]
    with pytest.raises(Exception):
        e.text = "x"


def test_a_column_like_object_is_read_through_its_text():
    class Column:   # Spark Connect's Column prints its SQL so
        def __str__(self):
            return "Column<'(value.n > 1)'>"
    assert expression(Column()).evaluate(ROW) is True


@pytest.mark.parametrize("d, text", [(1.0, "1.0"), (100.0, "100.0"), (1234567.0, "1234567.0"),
                                     (12345678.0, "1.2345678E7"), (0.001, "0.001"), (0.0001, "1.0E-4"),
                                     (-0.0, "-0.0"), (1 / 3, "0.3333333333333333"), (float("nan"), "NaN")])
def test_doubles_print_as_java_prints_them(d, text):
    assert double_str(d) == text


def test_decimal_arithmetic_on_untyped_fields_takes_spark_result_types():
    """Without a schema a field's type comes from its value; a decimal intermediate keeps the type
    Spark gives it (``a - 2.5`` with ``a`` BIGINT is DECIMAL(22,1), so the division's scale is 17),
    not the DECIMAL(4,1) its digits suggest (scale 6: 2.301496)."""
    row = {"value": {"a": -432, "b": -1000}}
    got = expression("value.b / (value.a - 2.5)").evaluate(row)
    assert got == Decimal("2.30149597238204833") and type(got) is Decimal
