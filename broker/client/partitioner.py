"""Kafka's default partitioner: murmur2 of the key, made positive, modulo the partition count.

Keyed records must land where Kafka's Java client (and librdkafka's ``murmur2_random``) puts
them, so a topic shared with Kafka tooling keeps the same key-to-partition mapping. The scalar
function follows Kafka's ``Utils.murmur2``; the vectorised one computes the same hash for a whole
Arrow array of keys with numpy uint32 arithmetic, one step per 4-byte block position.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

SEED = 0x9747B28C
M = 0x5BD1E995
R = 24
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 as a signed 32-bit int (what Java returns)."""
    length = len(data)
    h = (SEED ^ length) & _MASK
    blocks = length // 4
    for i in range(blocks):
        k = int.from_bytes(data[4 * i: 4 * i + 4], "little")
        k = (k * M) & _MASK
        k ^= k >> R
        k = (k * M) & _MASK
        h = ((h * M) & _MASK) ^ k
    tail = data[4 * blocks:]
    if tail:
        for i in range(len(tail) - 1, -1, -1):
            h ^= tail[i] << (8 * i)
        h = (h * M) & _MASK
    h ^= h >> 13
    h = (h * M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not abs, so MIN_VALUE maps to 0)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    return to_positive(murmur2(key)) % num_partitions


def partitions_for_keys(keys, num_partitions: int) -> np.ndarray:
    """Partition of every key in a binary Arrow array (-1 for null keys), vectorised."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks() if keys.num_chunks != 1 else keys.chunk(0)
    if keys.type not in (pa.binary(), pa.large_binary()):
        keys = keys.cast(pa.binary())
    n = len(keys)
    out = np.full(n, -1, dtype=np.int32)
    if n == 0:
        return out
    _, offsets_buf, data_buf = keys.buffers()
    offset_type = np.int64 if keys.type == pa.large_binary() else np.int32
    offsets = np.frombuffer(offsets_buf, dtype=offset_type)[keys.offset: keys.offset + n + 1].astype(np.int64)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    data = np.concatenate((data[: offsets[-1] if n else 0], np.zeros(4, np.uint8)))
    valid = ~np.asarray(keys.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    starts, lengths = offsets[:-1], offsets[1:] - offsets[:-1]
    hashes = _murmur2_many(data, starts, lengths)
    out[valid] = ((hashes[valid] & np.uint32(0x7FFFFFFF)) % np.uint32(num_partitions)).astype(np.int32)
    return out


def _murmur2_many(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    m = np.uint32(M)
    h = np.uint32(SEED) ^ lengths.astype(np.uint32)
    blocks = lengths // 4
    order = np.argsort(-blocks, kind="stable")  # keys with most blocks first: active set is a prefix
    sorted_blocks = blocks[order]
    sorted_starts = starts[order]
    hs = h[order]
    for j in range(int(sorted_blocks[0]) if len(order) else 0):
        active = int(np.searchsorted(-sorted_blocks, -j, side="left"))  # keys with more than j blocks
        idx = sorted_starts[:active] + 4 * j
        k = _word(data, idx)
        k = k * m
        k ^= k >> np.uint32(R)
        k = k * m
        hs[:active] = (hs[:active] * m) ^ k
    h[order] = hs
    rem = lengths % 4
    base = starts + (lengths - rem)
    tail = np.zeros(len(h), dtype=np.uint32)
    for i in (2, 1, 0):
        has = rem > i
        tail[has] ^= data[base[has] + i].astype(np.uint32) << np.uint32(8 * i)
    with_tail = rem > 0
    h[with_tail] = (h[with_tail] ^ tail[with_tail]) * m
    h ^= h >> np.uint32(13)
    h = h * m
    h ^= h >> np.uint32(15)
    return h


def _word(data: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """Little-endian uint32 at each byte index."""
    return (data[idx].astype(np.uint32) | (data[idx + 1].astype(np.uint32) << np.uint32(8))
            | (data[idx + 2].astype(np.uint32) << np.uint32(16)) | (data[idx + 3].astype(np.uint32) << np.uint32(24)))
