"""librdkafka's partitioners: hashes against reference values, the vectorised path against the
scalar one, and where each puts null and empty keys."""
from __future__ import annotations

import zlib

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.client.producer_batch import StickyPartitioner, assign_partitions
from broker.client.config import PRODUCER_CONFIG
from broker.client.partitioner import (PARTITIONERS, fnv1a, murmur2, partition_with, partitions_with, to_positive)
from broker.errors import InvalidConfigError
from broker.records.arrow_body import record_batch

pytestmark = pytest.mark.unit

# FNV-1a 32-bit test vectors of the algorithm's authors (isthe.com/chongo/tech/comp/fnv: 0x811C9DC5,
# 0xE40C292C, 0xBF9CF968) as librdkafka's rd_fnv1a returns them: the absolute value of the signed
# int32 (Sarama's hash partitioner). tests/unit/test_partitioner_fnv1a.py has librdkafka's own.
FNV1A_VECTORS = {b"": 0x7EE3623B, b"a": 0x1BF3D6D4, b"foobar": 0x40630698}
HASHED = ["murmur2", "consistent", "fnv1a"]


@pytest.mark.parametrize("key, expected", FNV1A_VECTORS.items())
def test_fnv1a_reference_values(key, expected):
    assert fnv1a(key) == expected


def test_murmur2_keyed_partition_as_javas():
    # Kafka's UtilsTest vector: murmur2("foobar") = -790332482 -> toPositive % 12
    assert partition_with("murmur2", b"foobar", 12) == (-790332482 & 0x7FFFFFFF) % 12 == 6
    assert partition_with("murmur2_random", b"foobar", 12) == 6


def test_consistent_is_crc32():
    for key in (b"hejsan", b"this is another string with more length to it perhaps", b"\x00\xff"):
        assert partition_with("consistent", key, 17) == zlib.crc32(key) % 17


def test_null_keys_per_partitioner():
    assert partition_with("murmur2", None, 7) == to_positive(murmur2(b"")) % 7  # one partition
    assert partition_with("consistent", None, 7) == 0
    assert partition_with("fnv1a", None, 7) == 0x7EE3623B % 7
    for name in ("murmur2_random", "consistent_random", "fnv1a_random", "random"):
        assert partition_with(name, None, 7) == -1  # sticky random
    assert partition_with("consistent_random", b"", 7) == -1  # librdkafka: empty keys random too
    assert partition_with("murmur2_random", b"", 7) == to_positive(murmur2(b"")) % 7


keys_st = st.lists(st.one_of(st.none(), st.binary(max_size=40)), max_size=60)


@settings(max_examples=200, deadline=None)
@given(keys_st, st.integers(1, 500), st.sampled_from([p for p in PARTITIONERS if p != "random"]))
def test_vectorised_equals_scalar(keys, n, name):
    got = partitions_with(name, pa.array(keys, pa.binary()), n).tolist()
    assert got == [partition_with(name, k, n) for k in keys]


@given(keys_st, st.integers(1, 50))
def test_random_stays_in_range_and_leaves_null_keys_sticky(keys, n):
    got = partitions_with("random", pa.array(keys, pa.binary()), n, np.random.default_rng(1))
    assert all((p == -1) == (k is None) for p, k in zip(got, keys)) and ((got >= -1) & (got < n)).all()


def test_sliced_and_chunked_arrays():
    keys = [b"k%d" % i for i in range(50)]
    whole = partitions_with("fnv1a", pa.array(keys, pa.binary()), 9)
    chunked = pa.chunked_array([pa.array(keys[:20], pa.binary()), pa.array(keys[20:], pa.binary())])
    assert partitions_with("fnv1a", chunked, 9).tolist() == whole.tolist()
    assert partitions_with("consistent", pa.array(keys, pa.binary()).slice(7, 30), 9).tolist() == \
        [zlib.crc32(k) % 9 for k in keys[7:37]]


@pytest.mark.parametrize("name", HASHED)
def test_assign_partitions_keeps_explicit_and_sends_null_keys_to_one_partition(name):
    batch = record_batch([None, b"a", None, b"b"], [b"v"] * 4, [0] * 4, None)
    explicit = np.array([-1, -1, 3, -1], dtype=np.int32)
    parts = assign_partitions(batch, explicit, 5, "t", StickyPartitioner(), 1000, name)
    assert parts[2] == 3 and parts[0] == partition_with(name, None, 5)
    assert [parts[1], parts[3]] == [partition_with(name, b"a", 5), partition_with(name, b"b", 5)]


def test_config_takes_every_librdkafka_partitioner_and_refuses_others():
    for name in PARTITIONERS:
        assert PRODUCER_CONFIG.parse({"partitioner": name})["partitioner"] == name
    with pytest.raises(InvalidConfigError):
        PRODUCER_CONFIG.parse({"partitioner": "crc"})
