"""Kafka's default partitioner for keyed records: ``toPositive(murmur2(key)) % partitions``.

Kafka clients place keyed records with murmur2, so using the same hash here puts a key on the
same partition as Kafka's Java client and librdkafka's ``murmur2_random`` partitioner do.
"""
from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa

SEED = 0x9747B28C
M = 0x5BD1E995
R = 24
_U32 = 0xFFFFFFFF
# Low ``n`` bytes of a little-endian word, for n = 0..3 trailing bytes.
_TAIL_MASKS = np.array([0, 0xFF, 0xFFFF, 0xFFFFFF], dtype=np.uint32)


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``, returned as Java's signed 32-bit int."""
    n = len(data)
    blocks = n // 4
    h = SEED ^ n
    for k in struct.unpack_from(f"<{blocks}I", data):
        k = (k * M) & _U32
        k = ((k ^ (k >> R)) * M) & _U32
        h = ((h * M) & _U32) ^ k
    if n & 3:  # 1-3 trailing bytes, little-endian
        h = ((h ^ int.from_bytes(data[4 * blocks:], "little")) * M) & _U32
    h ^= h >> 13
    h = (h * M) & _U32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's ``Utils.toPositive``: clear the sign bit (not ``abs``, so MIN_VALUE maps to 0)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    return to_positive(murmur2(key)) % num_partitions


def partitions_for_keys(keys: pa.Array | pa.ChunkedArray, num_partitions: int) -> np.ndarray:
    """``partition_for_key`` of every key of a binary Arrow array as int32; -1 for null keys."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    if isinstance(keys, pa.ChunkedArray):
        parts = [partitions_for_keys(c, num_partitions) for c in keys.chunks]
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.int32)
    if not (pa.types.is_binary(keys.type) or pa.types.is_large_binary(keys.type)):
        raise TypeError(f"keys must be binary or large_binary, got {keys.type}")
    if len(keys) == 0:
        return np.empty(0, dtype=np.int32)
    data, starts, lengths = _flat_keys(keys)
    h = _murmur2_many(data, starts, lengths)
    out = ((h & np.uint32(0x7FFFFFFF)) % np.uint32(num_partitions)).astype(np.int32)
    if keys.null_count:
        out[keys.is_null().to_numpy(zero_copy_only=False)] = -1
    return out


def _flat_keys(keys: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The array's bytes (plus 4 zero bytes of padding) and each key's start and length in them."""
    _, offsets_buf, data_buf = keys.buffers()
    offset_type = np.int64 if pa.types.is_large_binary(keys.type) else np.int32
    offsets = np.frombuffer(offsets_buf, dtype=offset_type)[keys.offset: keys.offset + len(keys) + 1]
    first, last = int(offsets[0]), int(offsets[-1])
    data = np.zeros(last - first + 4, dtype=np.uint8)  # padding: tail word reads run past the end
    if last > first:
        data[: last - first] = np.frombuffer(data_buf, dtype=np.uint8)[first:last]
    starts = offsets[:-1].astype(np.int64) - first
    return data, starts, np.diff(offsets).astype(np.int64)


def _murmur2_many(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """murmur2 (as uint32) of every key."""
    # words[i] is the little-endian uint32 starting at byte i (an overlapping, unaligned view).
    words = np.ndarray(shape=(len(data) - 3,), dtype="<u4", buffer=data, strides=(1,))
    m = np.uint32(M)
    h = _mix_blocks(words, np.uint32(SEED) ^ lengths.astype(np.uint32), starts, lengths // 4)
    rem = lengths & 3
    tail = words[starts + lengths - rem] & _TAIL_MASKS[rem]
    h = np.where(rem > 0, (h ^ tail) * m, h)
    h ^= h >> np.uint32(13)
    h *= m
    h ^= h >> np.uint32(15)
    return h


def _mix_blocks(words: np.ndarray, h: np.ndarray, pos: np.ndarray, blocks: np.ndarray) -> np.ndarray:
    """Fold each key's whole 4-byte blocks into ``h``: one vector step per block position j,
    masking keys with no block j. Once most keys are done they are dropped from the working set,
    so one long key among many short ones does not cost (longest key x number of keys)."""
    m, last = np.uint32(M), len(words) - 1
    alive = len(blocks) - np.cumsum(np.bincount(blocks))  # alive[j]: keys with a block j
    out, rows = h, slice(None)
    for j in range(len(alive) - 1):
        if 2 * alive[j] <= len(h):
            out[rows] = h
            keep = np.flatnonzero(blocks > j)
            rows, h, pos, blocks = np.arange(len(out))[rows][keep], h[keep], pos[keep], blocks[keep]
        idx = pos + 4 * j
        k = words[np.minimum(idx, last, out=idx)]  # clamped: keys past their end are masked below
        k *= m
        k ^= k >> np.uint32(R)
        k *= m
        h = np.where(blocks > j, (h * m) ^ k, h)
    out[rows] = h
    return out
