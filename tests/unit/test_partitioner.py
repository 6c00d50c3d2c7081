"""Kafka's murmur2 partitioner: exact Java values, and the vectorised path agreeing with the scalar one."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.client.partitioner import (
    murmur2, partition_for_key, partitions_for_keys, to_positive,
)

pytestmark = pytest.mark.unit

# From Apache Kafka's UtilsTest.testMurmur2
# (clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java).
KAFKA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}

keys_st = st.lists(st.one_of(st.none(), st.binary(min_size=0, max_size=40)), max_size=60)
partitions_st = st.integers(min_value=1, max_value=1000)


@pytest.mark.parametrize("key,expected", KAFKA_VECTORS.items())
def test_murmur2_matches_kafka(key, expected):
    assert murmur2(key) == expected


def test_vectorised_matches_kafka_vectors():
    keys = pa.array(list(KAFKA_VECTORS), type=pa.binary())
    want = [to_positive(h) % 7 for h in KAFKA_VECTORS.values()]
    assert partitions_for_keys(keys, 7).tolist() == want


def test_to_positive_clears_sign_bit():
    assert to_positive(-(2 ** 31)) == 0
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-790332482) == 1357151166
    assert partition_for_key(b"foobar", 10) == 1357151166 % 10


def test_empty_key_is_hashed():
    assert isinstance(murmur2(b""), int)
    assert partitions_for_keys(pa.array([b""], pa.binary()), 13).tolist() == [partition_for_key(b"", 13)]


def test_empty_array():
    out = partitions_for_keys(pa.array([], pa.binary()), 3)
    assert out.dtype == np.int32 and len(out) == 0


def _expected(keys, n):
    return [-1 if k is None else partition_for_key(k, n) for k in keys]


@settings(max_examples=200, deadline=None)
@given(keys=keys_st, n=partitions_st, large=st.booleans())
def test_vectorised_equals_scalar(keys, n, large):
    arr = pa.array(keys, type=pa.large_binary() if large else pa.binary())
    out = partitions_for_keys(arr, n)
    assert out.dtype == np.int32
    assert out.tolist() == _expected(keys, n)


@settings(max_examples=200, deadline=None)
@given(keys=keys_st, n=partitions_st, data=st.data())
def test_vectorised_on_slice(keys, n, data):
    start = data.draw(st.integers(0, len(keys)))
    stop = data.draw(st.integers(start, len(keys)))
    arr = pa.array(keys, type=pa.binary()).slice(start, stop - start)
    assert partitions_for_keys(arr, n).tolist() == _expected(keys[start:stop], n)


@settings(max_examples=100, deadline=None)
@given(chunks=st.lists(keys_st, max_size=4), n=partitions_st)
def test_vectorised_on_chunked_array(chunks, n):
    arr = pa.chunked_array([pa.array(c, type=pa.binary()) for c in chunks], type=pa.binary())
    flat = [k for c in chunks for k in c]
    assert partitions_for_keys(arr, n).tolist() == _expected(flat, n)


@given(key=st.binary(max_size=40), n=partitions_st)
def test_same_key_same_partition(key, n):
    p = partition_for_key(key, n)
    assert 0 <= p < n
    assert partition_for_key(key, n) == p
    assert partitions_for_keys(pa.array([key] * 5, pa.binary()), n).tolist() == [p] * 5


def test_one_long_key_among_short_ones():
    keys = [b"k%d" % i for i in range(300)] + [bytes(range(256)) * 8, None, b"", b"abcdefg"]
    arr = pa.array(keys, type=pa.binary())
    assert partitions_for_keys(arr, 97).tolist() == _expected(keys, 97)
