"""The fnv1a partitioners as librdkafka's: ``rd_fnv1a`` keeps the FNV-1a hash in a signed int32 and
takes its absolute value (Sarama's NewHashPartitioner), so about half of all keys land elsewhere
than under plain unsigned FNV-1a."""
from __future__ import annotations

import ctypes
import random

import numpy as np
import pyarrow as pa
import pytest

from broker.client import fnv1a as fnv1a_partition
from broker.client.producer_batch import StickyPartitioner, assign_partitions
from broker.client.partitioner import fnv1a, partition_with, partitions_with
from broker.records.arrow_body import record_batch

pytestmark = pytest.mark.unit

# librdkafka's src/rdfnv1a.c unittest_fnv1a (values from Go's hash/fnv through Sarama's abs).
_UNALIGNED = b"PreAmbleWillBeRemoved,ThePrePartThatIs"
RDKAFKA_VECTORS = {
    b"kafka": 0x0D33C4E1, b"giberish123456789": 0x77A58295,
    b"1234": 0x023BDD03, b"234": 0x2DEA3CD2, b"34": 0x740FA83E, b"4": 0x310CA263,
    _UNALIGNED: 0x65CBD69C, _UNALIGNED[1:]: 0x6E49C79A, _UNALIGNED[2:]: 0x69EED356, _UNALIGNED[3:]: 0x6ABCC023,
    b"": 0x7EE3623B,
}
# librdkafka's tests/0048-partitioner.c: keys and the hash each partition is taken from.
PARTITIONER_TEST_KEYS = {None: 0x7EE3623B, b"": 0x7EE3623B, b"23456": 0x27E6F469,
                         b"this is another string with more length to it perhaps": 0x155E3E5F,
                         b"hejsan": 0x17B1E27A}


def rd_fnv1a(key: bytes) -> int:
    """A line-by-line port of rd_fnv1a: ``int32_t h``, ``h ^= byte; h *= prime``, ``if (h < 0) h = -h``."""
    h = ctypes.c_int32(0x811C9DC5)
    for byte in key:
        h = ctypes.c_int32((h.value ^ byte) * 0x01000193)
    if h.value < 0:
        h = ctypes.c_int32(-h.value)
    return ctypes.c_uint32(h.value).value


def _keys(count: int = 3000) -> list[bytes]:
    rng = random.Random(48)
    return [rng.randbytes(rng.randrange(0, 40)) for _ in range(count)] + [b"user-%d" % i for i in range(count)]


@pytest.mark.parametrize("key, expected", RDKAFKA_VECTORS.items())
def test_fnv1a_matches_librdkafkas_unit_test_vectors(key, expected):
    assert fnv1a(key) == rd_fnv1a(key) == expected


@pytest.mark.parametrize("name", ["fnv1a", "fnv1a_random"])
def test_partitions_match_librdkafkas_partitioner_test(name):
    for count in (7, 17):
        for key, hashed in PARTITIONER_TEST_KEYS.items():
            expected = -1 if key is None and name == "fnv1a_random" else hashed % count
            assert partition_with(name, key, count) == expected, key
        keys = pa.array(list(PARTITIONER_TEST_KEYS), pa.binary())
        expected = [-1 if k is None and name == "fnv1a_random" else h % count for k, h in PARTITIONER_TEST_KEYS.items()]
        assert partitions_with(name, keys, count).tolist() == expected


def test_many_keys_scalar_vectorised_and_public_function_agree_with_the_port():
    keys = _keys()
    assert sum(rd_fnv1a(k) != _plain_fnv1a(k) for k in keys) > len(keys) // 3   # the sign matters often
    for count in (1, 7, 17, 1000, 2**31 - 1):
        expected = [rd_fnv1a(k) % count for k in keys]
        assert [partition_with("fnv1a", k, count) for k in keys] == expected
        assert partitions_with("fnv1a", pa.array(keys, pa.binary()), count).tolist() == expected
        assert partitions_with("fnv1a_random", pa.array(keys, pa.large_binary()), count).tolist() == expected
    assert [fnv1a_partition(k, 17) for k in keys[:200]] == [rd_fnv1a(k) % 17 for k in keys[:200]]


def test_a_hash_of_int32_min_stays_0x80000000_as_in_c():
    """``-INT32_MIN`` wraps to itself in rd_fnv1a (its plain FNV-1a is exactly 0x80000000)."""
    key = b"\x02W\x96\xdfM"
    assert _plain_fnv1a(key) == rd_fnv1a(key) == fnv1a(key) == 0x80000000
    for count in (3, 7, 17):
        assert partitions_with("fnv1a", pa.array([key, b"x"], pa.binary()), count).tolist() == \
            [0x80000000 % count, rd_fnv1a(b"x") % count]


def test_the_producers_assignment_uses_the_signed_hash():
    """What the sender runs for produce() and produce_batch() records without a partition."""
    keys = _keys(500)
    batch = record_batch(keys, [b"v"] * len(keys), [0] * len(keys), None)
    for name in ("fnv1a", "fnv1a_random"):
        parts = assign_partitions(batch, np.full(len(keys), -1, dtype=np.int32), 17, "t", StickyPartitioner(),
                                  16384, name)
        assert parts.tolist() == [rd_fnv1a(k) % 17 for k in keys]


def _plain_fnv1a(key: bytes) -> int:
    h = 0x811C9DC5
    for byte in key:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h
