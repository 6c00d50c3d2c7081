"""Cast converts a field's default with the field (Kafka's CastTest: castFieldsWithSchema,
castWholeRecordDefaultValue), as ``castValueToType`` does: Java's narrowing, ``longValue() != 0``
for a boolean, ``toString`` for a string; a default that does not parse fails the schema."""
import pytest
from pyspark.sql.types import BooleanType, DoubleType, FloatType, IntegerType, LongType, StringType, TimestampType

from connect.cast import cast_default
from connect.errors import DataError


@pytest.mark.parametrize("text, from_t, to, expected", [
    ("2", IntegerType(), "int64", "2"),                  # castFieldsWithSchema: int32 default 2 -> 2L
    ("-1.125", DoubleType(), "boolean", "true"),         # float64 default -1.125 -> true
    ("-42.125", FloatType(), "int32", "-42"),            # castWholeRecordDefaultValue
    ("0.5", DoubleType(), "boolean", "false"),           # longValue() is 0
    ("300", IntegerType(), "int8", "44"), ("1e20", DoubleType(), "int32", "2147483647"),
    ("1e20", DoubleType(), "int8", "-1"),                # (byte)(int) 1e20: saturate, then wrap
    ("5", DoubleType(), "string", '"5.0"'), ("1e20", DoubleType(), "string", '"1.0E20"'),
    ("true", BooleanType(), "int16", "1"), ("true", BooleanType(), "string", '"true"'),
    ('"TRUE"', StringType(), "boolean", "true"), ('"12"', StringType(), "int8", "12"),
    ('" 1.5 "', StringType(), "float64", "1.5"), ("7", LongType(), "float32", "7.0"),
    ("1700000000000", TimestampType(), "int64", None),   # a logical type: no plain JSON default
])
def test_a_cast_fields_default_is_cast_as_kafka_casts_it(text, from_t, to, expected):
    assert cast_default(text, from_t, to) == expected


@pytest.mark.parametrize("text, to", [('"x"', "int32"), ('"300"', "int8"), ('"1.5"', "int64"), ('"one"', "float32")])
def test_a_default_that_does_not_parse_is_refused(text, to):
    with pytest.raises(DataError):
        cast_default(text, StringType(), to)
