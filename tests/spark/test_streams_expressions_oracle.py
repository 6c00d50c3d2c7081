"""Spark is the oracle of :mod:`streams.expressions`: each expression is evaluated by Spark
(``selectExpr`` over a one-row-per-case DataFrame) and by the plain-Python interpreter, and the
results must be equal, Decimal against Decimal and float against float. Cases are batched so
that one Spark job checks many of them."""
from __future__ import annotations

from datetime import date, datetime, timezone
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from streams.expressions import ExpressionEvaluationError, expression

pytestmark = pytest.mark.spark

SCHEMA = ("key string, value struct<user:string, amount:double, n:bigint, z:bigint, price:decimal(10,2), "
          "tags:array<string>, name:struct<first:string, last:string>, flag:boolean, s:string>, timestamp timestamp")
TS = datetime(2024, 3, 4, 5, 6, 7, 123456, tzinfo=timezone.utc)
VALUE = {"user": "Ann", "amount": 2.5, "n": 3, "z": None, "price": Decimal("19.99"), "tags": ["a", "b", None],
         "name": {"first": "Ann", "last": "Lee"}, "flag": True, "s": " 42 "}
ROW = {"key": "k1", "value": VALUE, "timestamp": TS}
NULLS = {"key": None, "value": {**{k: None for k in VALUE}}, "timestamp": TS}

CASES = [
    # columns and nested access
    "key", "value.user", "value.name.first", "`value`.`name`.last", "value.tags", "value.price", "timestamp",
    "struct(value.user, value.amount * 1.2, value.n + 1, key, upper(key), 1, 'x', value.n AS m)",
    "named_struct('u', value.user, 'g', value.amount * 1.2)", "struct(value.name)", "value.name",
    # literals and decimal typing
    "1.2", "value.n * 1.2", "value.amount * 1.2", "value.price * 2", "value.price * 1.5", "value.price / 3",
    "1.0 / 3", "value.price + value.amount", "0.1 + 0.2", "1.5e0 + 1", "5000000000", "-7",
    # arithmetic and null propagation
    "value.n + value.z", "value.n - 10", "value.n * value.n", "7 / 2", "value.n / 2", "7 div 2", "-7 div 2",
    "value.n div 2", "-7 % 3", "7 % -3", "value.amount % 2", "-value.amount", "-value.n", "value.n + '4'",
    # comparisons and logic
    "value.amount > 2", "value.n = 3", "value.n <=> value.z", "value.z = 1", "value.z IS NULL",
    "value.n IS NOT NULL", "value.z = 1 AND value.n = 4", "value.z = 1 OR value.n = 3", "NOT value.flag",
    "value.n IN (1, 2, 3)", "value.n IN (1, value.z)", "value.n NOT IN (1, 2)", "value.amount BETWEEN 2 AND 3",
    "value.user LIKE 'A%'", "value.user LIKE '_n_'", "value.user ILIKE 'a%'", "value.user RLIKE '^A.n$'",
    "'abc' < 'abd'", "value.n = '3'",
    # conditionals
    "CASE WHEN value.amount > 2 THEN 'big' ELSE 'small' END", "CASE value.n WHEN 3 THEN 'three' END",
    "CASE WHEN value.z > 1 THEN 1 END", "if(value.flag, value.n, 0)", "coalesce(value.z, value.n, 1)",
    "coalesce(value.z, 1, 2.5)", "nvl(value.z, 0)", "ifnull(value.user, 'none')", "nullif(value.n, 3)",
    "nvl2(value.z, 'set', 'unset')",
    # casts
    "cast(value.amount as int)", "cast(value.s as int)", "cast(value.n as string)", "cast(value.amount as string)",
    "cast(value.amount * 1e7 as string)", "cast(value.price as string)", "cast(value.flag as int)",
    "cast('yes' as boolean)", "cast('2024-01-02' as date)", "cast('2024-01-02 03:04:05.5' as timestamp)",
    "cast(timestamp as string)", "cast(timestamp as date)", "cast(timestamp as bigint)", "cast(value.n as double)",
    "cast(value.amount as decimal(5,1))", "cast(value.tags as string)", "cast(value.name as string)",
    "try_cast(value.user as int)", "cast(0.0001e0 as string)", "cast(value.n as tinyint)",
    # strings
    "upper(value.user)", "lower(value.user)", "concat(value.user, '-', key)", "concat(value.user, value.z)",
    "concat('a', 1.50, 2, true)", "concat_ws('/', value.user, value.z, key)", "concat_ws(',', value.tags)",
    "value.user || key", "length(value.user)", "substring(value.user, 2)", "substring(value.user, -2, 1)",
    "substr(value.user, 0, 2)", "trim(value.s)", "ltrim(value.s)", "rtrim(value.s)", "split('a,b,,c', ',')",
    "regexp_extract('order-123', '([a-z]+)-(\\\\d+)', 2)", "regexp_extract('x', '(\\\\d+)', 1)",
    "replace(value.user, 'n', 'N')", "startswith(value.user, 'An')", "endswith(value.user, 'x')",
    "contains(value.user, 'nn')", "lpad(cast(value.n as string), 4, '0')", "rpad(value.user, 6, '*')",
    "lpad(value.user, 2, '0')", "format_string('%s has %d', value.user, value.n)",
    # math
    "abs(-value.amount)", "abs(value.n - 10)", "round(2.5)", "round(-2.5)", "round(value.amount)",
    "round(value.price, 1)", "round(2.345, 2)", "round(value.n, -1)", "floor(value.amount)", "ceil(value.amount)",
    "floor(value.price)", "greatest(value.n, 1.5e0, value.amount)", "least(value.n, value.z, 2)", "pow(value.n, 2)",
    "sqrt(value.amount)", "greatest(1, 2.5, value.n)",
    # collections
    "array(value.n, 1)", "array(1, 2.5)", "map('a', value.n)", "map('a', 1)['a']", "element_at(value.tags, 1)",
    "element_at(value.tags, -1)", "value.tags[1]", "size(value.tags)", "array_contains(value.tags, 'b')",
    "element_at(map('a', 1), 'b')",
    # dates
    "year(timestamp)", "month(timestamp)", "day(timestamp)", "hour(timestamp)", "minute(timestamp)",
    "second(timestamp)", "to_date('2024-03-04')", "unix_timestamp(timestamp)",
    "date_format(timestamp, 'yyyy-MM-dd HH:mm:ss.SSS')", "date_format(timestamp, 'yyyy/MM/dd')",
]

FAILING = ["value.amount div 2", "value.n / 0", "value.n % 0", "cast(value.user as int)", "2147483647 + 1", "element_at(value.tags, 9)",
           "value.tags[9]", "cast(9223372036854775807 as bigint) + value.n", "value.user + 1"]


def normalise(v):
    """Spark's collected value in the interpreter's shape: Rows as dicts, timestamps in UTC."""
    if hasattr(v, "asDict"):
        return {k: normalise(x) for k, x in zip(v.__fields__, v)}
    if isinstance(v, dict):
        return {k: normalise(x) for k, x in v.items()}
    if isinstance(v, list):
        return [normalise(x) for x in v]
    if isinstance(v, datetime):
        return v.astimezone(timezone.utc) if v.tzinfo else v.astimezone().astimezone(timezone.utc)
    return v


def same(a, b) -> bool:
    """Equal values of equal Python types (a Decimal is never equal to a float here)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and a != a:
        return b != b
    return a == b


def spark_values(spark, rows: list[dict], exprs: list[str]) -> list[list]:
    """Each expression over each row, in one Spark job."""
    data = [(r["key"], r["value"], r["timestamp"]) for r in rows]
    df = spark.createDataFrame(data, SCHEMA)
    names = [f"c{i}" for i in range(len(exprs))]
    collected = df.selectExpr(*[f"{e} AS {n}" for e, n in zip(exprs, names)]).collect()
    return [[normalise(r[n]) for n in names] for r in collected]


@pytest.fixture(scope="module")
def quiet(spark):
    spark.sparkContext.setLogLevel("OFF")
    return spark


def test_a_table_of_expressions_gives_what_spark_gives(quiet):
    rows = [ROW, NULLS]
    got = spark_values(quiet, rows, CASES)
    mismatches = []
    for r, values in zip(rows, got):
        for text, want in zip(CASES, values):
            try:
                mine = expression(text).evaluate(r)
            except ExpressionEvaluationError as e:
                mine = e
            if not same(mine, want):
                mismatches.append(f"{text!r} on {'nulls' if r is NULLS else 'row'}: spark {want!r}, python {mine!r}")
    assert len(CASES) >= 60
    assert not mismatches, "\n".join(mismatches)


@pytest.mark.parametrize("text", FAILING)
def test_what_fails_in_spark_fails_here(quiet, text):
    with pytest.raises(Exception) as spark_error:
        spark_values(quiet, [ROW], [text])
    with pytest.raises(ExpressionEvaluationError) as mine:
        expression(text).evaluate(ROW)
    assert mine.value.details["error_class"].split(".")[0] in str(spark_error.value)


# ------------------------------------------------------------------------------ random trees
LEAVES = ["value.a", "value.b", "value.x", "value.y", "1", "-3", "2.5", "0.5e0", "NULL"]
ARITH = ["+", "-", "*", "/", "%"]   # div over a DOUBLE is an analysis error in Spark: tested in the table
CMP = ["=", "<", ">=", "<=>", "<>"]


def trees(depth):
    leaf = st.sampled_from(LEAVES)
    if depth == 0:
        return leaf
    sub = trees(depth - 1)
    return st.one_of(leaf, st.builds(lambda a, op, b: f"({a} {op} {b})", sub, st.sampled_from(ARITH), sub))


predicates = st.one_of(trees(3), st.builds(lambda a, op, b: f"({a} {op} {b})", trees(2), st.sampled_from(CMP),
                                           trees(2)),
                       st.builds(lambda a, b: f"(({a}) > 0 AND ({b}) < 0) OR ({a}) IS NULL", trees(2), trees(2)))
ints = st.one_of(st.none(), st.integers(-1000, 1000), st.sampled_from([0, 1, -1, 2**31, 2**62]))
doubles = st.one_of(st.none(), st.floats(-1e6, 1e6, allow_nan=False).map(lambda f: round(f, 3)),
                    st.sampled_from([0.0, -0.0, 1.5]))
RANDOM_SCHEMA = "value struct<a:bigint, b:bigint, x:double, y:double>"


def _evaluate(text, row):
    try:
        return expression(text).evaluate(row)
    except ExpressionEvaluationError:
        return "error"


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck), phases=[Phase.generate])
@given(st.lists(st.tuples(predicates, ints, ints, doubles, doubles), min_size=150, max_size=150))
def test_random_arithmetic_and_comparisons_match_spark(quiet, cases):
    """Hundreds of random expressions per Spark job: each case is one row; its expression is
    wrapped in ``try``-free SQL and compared per row. A case Spark fails on is run alone."""
    texts = sorted({t for t, *_ in cases})
    rows = [{"value": {"a": a, "b": b, "x": x, "y": y}} for _, a, b, x, y in cases]
    df = quiet.createDataFrame([(r["value"],) for r in rows], RANDOM_SCHEMA)
    # One column per distinct expression, guarded so one failing row does not fail the job:
    # Spark's result per row is either the value or the marker of an error (checked alone below).
    mine = [[_evaluate(t, r) for t in texts] for r in rows]
    safe = [i for i, t in enumerate(texts) if all(m[i] != "error" for m in mine)]
    if safe:
        collected = df.selectExpr(*[f"{texts[i]} AS c{i}" for i in safe]).collect()
        for r, m, got in zip(rows, mine, collected):
            for i in safe:
                assert same(m[i], normalise(got[f"c{i}"])), f"{texts[i]} on {r}: spark {got[f'c{i}']!r}, python {m[i]!r}"
    erroring = [(t, next(r for r, m in zip(rows, mine) if m[i] == "error"))
                for i, t in enumerate(texts) if i not in set(safe)]
    for t, row in erroring[:5]:   # a Spark job each: a sample is enough
        if True:
            failing = [row]
            one = quiet.createDataFrame([(failing[0]["value"],)], RANDOM_SCHEMA)
            try:
                got = one.selectExpr(t).collect()[0][0]
            except Exception:
                continue
            pytest.fail(f"{t} on {failing[0]}: spark {got!r}, python raised")


def test_spark_column_text_is_read(quiet):
    from pyspark.sql import functions as F
    col = (F.col("value.amount") * 2 > 4) & F.col("value.flag")
    assert expression(col).evaluate(ROW) is True
    assert expression(F.upper(F.col("value.user"))).evaluate(ROW) == "ANN"
    assert date(2024, 3, 4) == expression("to_date(timestamp)").evaluate(ROW)
