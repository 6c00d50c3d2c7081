"""The serializers: Kafka's byte formats, round trips, and failures as SerializationError."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, strategies as st

from broker.client.serialization import (DoubleDeserializer, DoubleSerializer, IntegerDeserializer, IntegerSerializer,
                                         JSONDeserializer, JSONSerializer, MessageField, SerializationContext,
                                         SerializationError, StringDeserializer, StringSerializer)

pytestmark = pytest.mark.unit
CTX = SerializationContext("orders", MessageField.VALUE)


def test_java_byte_layouts():
    assert IntegerSerializer()(42, CTX) == b"\x00\x00\x00*"
    assert IntegerSerializer()(-1, CTX) == b"\xff\xff\xff\xff"
    assert DoubleSerializer()(1.0, CTX) == b"\x3f\xf0\x00\x00\x00\x00\x00\x00"
    assert StringSerializer()("é", CTX) == b"\xc3\xa9"
    assert JSONSerializer()({"a": [1, 2]}, CTX) == b'{"a":[1,2]}'


@given(st.integers(-2**31, 2**31 - 1))
def test_integer_round_trip(n):
    assert IntegerDeserializer()(IntegerSerializer()(n, CTX), CTX) == n


@given(st.floats(allow_nan=False))
def test_double_round_trip(x):
    assert DoubleDeserializer()(DoubleSerializer()(x, CTX), CTX) == x


def test_double_nan_round_trip():
    assert math.isnan(DoubleDeserializer()(DoubleSerializer()(math.nan)))


@given(st.text())
def test_string_round_trip(s):
    assert StringDeserializer()(StringSerializer()(s, CTX), CTX) == s
    assert StringDeserializer("utf_16")(StringSerializer("utf_16")(s, CTX), CTX) == s


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda c: st.lists(c) | st.dictionaries(st.text(), c), max_leaves=10))
def test_json_round_trip(obj):
    assert JSONDeserializer()(JSONSerializer()(obj, CTX), CTX) == obj


def test_json_hooks():
    class Order:
        def __init__(self, total):
            self.total = total
    data = JSONSerializer(lambda o, ctx: {"total": o.total})(Order(3), CTX)
    assert JSONDeserializer(lambda d, ctx: Order(d["total"]))(data, CTX).total == 3


@pytest.mark.parametrize("s", [StringSerializer(), IntegerSerializer(), DoubleSerializer(), JSONSerializer(),
                               StringDeserializer(), IntegerDeserializer(), DoubleDeserializer(), JSONDeserializer()])
def test_none_is_a_null(s):
    assert s(None, CTX) is None


@pytest.mark.parametrize("call", [
    lambda: IntegerSerializer()(2**31, CTX), lambda: IntegerSerializer()("1", CTX), lambda: IntegerSerializer()(True),
    lambda: IntegerDeserializer()(b"\x00\x01", CTX), lambda: DoubleDeserializer()(b"\x00", CTX),
    lambda: StringSerializer()(b"bytes", CTX), lambda: StringDeserializer()(b"\xff", CTX),
    lambda: JSONSerializer()(object(), CTX), lambda: JSONDeserializer()(b"{not json", CTX)])
def test_failures_are_serialization_errors(call):
    with pytest.raises(SerializationError):
        call()
