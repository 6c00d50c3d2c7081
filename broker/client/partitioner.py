"""The producer's ``partitioner`` setting: librdkafka's partitioners, vectorised over Arrow keys.

Kafka clients place keyed records with murmur2, so the default here (``murmur2_random``) puts a key
on the same partition as Kafka's Java client. The others are librdkafka's, with its hashes:

=================== ======================================= ====================================
name                keyed records                           null keys (empty keys: hashed, except
                                                            ``consistent_random`` randomises them)
=================== ======================================= ====================================
murmur2_random      ``toPositive(murmur2(key)) % n`` (Java) sticky random (Java's default)
murmur2             ``toPositive(murmur2(key)) % n``        one partition: that of ``murmur2(b"")``
consistent_random   ``crc32(key) % n``                      sticky random (librdkafka's default)
consistent          ``crc32(key) % n``                      one partition: ``crc32(b"") % n`` = 0
fnv1a_random        ``fnv1a(key) % n`` (int32 abs, Sarama)  sticky random
fnv1a               ``fnv1a(key) % n``                      one partition: that of ``fnv1a(b"")``
random              a random partition per record           sticky random
=================== ======================================= ====================================

"Sticky random" is librdkafka's ``sticky.partitioning.linger.ms`` (KIP-480): one random partition
kept for that long instead of one per record, and one per record when it is 0
(:class:`~broker.client.producer_batch.StickyPartitioner`); this module marks those rows -1. Records with an explicit partition never reach a partitioner.
"""
from __future__ import annotations

import struct
import zlib

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


PARTITIONERS = ("murmur2_random", "murmur2", "consistent_random", "consistent", "fnv1a_random", "fnv1a", "random")

FNV_OFFSET = 0x811C9DC5
FNV_PRIME = 0x01000193


def fnv1a(data: bytes) -> int:
    """librdkafka's ``rd_fnv1a``: 32-bit FNV-1a held as a signed int32 and made positive at the end
    (``abs``, so INT32_MIN stays 0x80000000), to place keys as Sarama's default hash partitioner
    does: ``fnv1a(b"") == 0x7ee3623b``, not FNV-1a's plain 0x811c9dc5."""
    h = FNV_OFFSET
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & _U32
    return (-h) & _U32 if h & 0x80000000 else h


def partition_with(partitioner: str, key: bytes | None, num_partitions: int) -> int:
    """One key's partition under ``partitioner``; -1 where the choice is (sticky) random."""
    if partitioner == "random" or key is None and partitioner.endswith("_random") \
            or partitioner == "consistent_random" and key == b"":
        return -1
    key = key or b""
    if partitioner.startswith("murmur2"):
        return partition_for_key(key, num_partitions)
    if partitioner.startswith("consistent"):
        return zlib.crc32(key) % num_partitions
    if partitioner.startswith("fnv1a"):
        return fnv1a(key) % num_partitions
    raise ValueError(f"unknown partitioner {partitioner!r}; one of {', '.join(PARTITIONERS)}")


def partitions_with(partitioner: str, keys: pa.Array | pa.ChunkedArray, num_partitions: int,
                    rng: np.random.Generator | None = None) -> np.ndarray:
    """:func:`partition_with` of every key of a binary Arrow array, as int32 (-1: sticky random)."""
    if partitioner not in PARTITIONERS:
        raise ValueError(f"unknown partitioner {partitioner!r}; one of {', '.join(PARTITIONERS)}")
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    if isinstance(keys, pa.ChunkedArray):
        parts = [partitions_with(partitioner, c, num_partitions, rng) for c in keys.chunks]
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.int32)
    nulls = keys.is_null().to_numpy(zero_copy_only=False) if keys.null_count else None
    if partitioner == "random":
        out = (rng or np.random.default_rng()).integers(0, num_partitions, len(keys), dtype=np.int32)
    elif partitioner.startswith("murmur2"):
        out = partitions_for_keys(keys, num_partitions)
        if nulls is not None and partitioner == "murmur2":
            out[nulls] = partition_for_key(b"", num_partitions)
    else:
        out = _byte_hash_partitions(partitioner, keys, num_partitions)
    if nulls is not None and (partitioner == "random" or partitioner.endswith("_random")):
        out[nulls] = -1
    if partitioner == "consistent_random" and len(keys):
        out[_flat_keys(keys)[2] == 0] = -1  # empty keys too, as librdkafka's
    return out


def _byte_hash_partitions(partitioner: str, keys: pa.Array, num_partitions: int) -> np.ndarray:
    if not (pa.types.is_binary(keys.type) or pa.types.is_large_binary(keys.type)):
        raise TypeError(f"keys must be binary or large_binary, got {keys.type}")
    if len(keys) == 0:
        return np.empty(0, dtype=np.int32)
    data, starts, lengths = _flat_keys(keys)
    if partitioner.startswith("fnv1a"):
        h = _fold_bytes(data, starts, lengths, np.uint32(FNV_OFFSET), _fnv1a_step)
        h = np.where(h & np.uint32(0x80000000), np.uint32(0) - h, h)  # fnv1a's abs of the int32
    else:
        h = _fold_bytes(data, starts, lengths, np.uint32(_U32), _crc32_step) ^ np.uint32(_U32)
    return (h % np.uint32(num_partitions)).astype(np.int32)


def _crc_table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> np.uint32(1)) ^ np.uint32(0xEDB88320), table >> np.uint32(1))
    return table.astype(np.uint32)


_CRC_TABLE = _crc_table()


def _crc32_step(h: np.ndarray, b: np.ndarray) -> np.ndarray:
    return _CRC_TABLE[(h ^ b) & np.uint32(0xFF)] ^ (h >> np.uint32(8))


def _fnv1a_step(h: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (h ^ b) * np.uint32(FNV_PRIME)


def _fold_bytes(data: np.ndarray, starts: np.ndarray, lengths: np.ndarray, init, step) -> np.ndarray:
    """``h = step(h, byte)`` over each key's bytes, one vector step per byte position: keys are
    visited longest first, so at position j the keys still going are a prefix (work = total bytes)."""
    order = np.argsort(-lengths, kind="stable")
    h = np.full(len(lengths), init, dtype=np.uint32)
    pos = starts[order]
    sorted_lengths = lengths[order]
    longest = int(sorted_lengths[0]) if len(order) else 0
    alive = len(order) - np.searchsorted(sorted_lengths[::-1], np.arange(longest), side="right")
    for j, count in enumerate(alive):
        h[:count] = step(h[:count], data[pos[:count] + j].astype(np.uint32))
    out = np.empty_like(h)
    out[order] = h
    return out


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
