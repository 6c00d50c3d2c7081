"""confluent-kafka's ``murmur2``, ``consistent`` and ``fnv1a`` functions: the partition librdkafka's
built-in partitioner of that name picks for a key, so an application can predict (or reproduce,
in a custom partitioner) where the producer puts a record.

    murmur2(b"user-42", 6)      # the partition Java's and librdkafka's default partitioner pick
"""
from __future__ import annotations

from broker.client.partitioner import partition_with


def _partition(partitioner: str, key: bytes, partition_count: int) -> int:
    if not isinstance(key, (bytes, bytearray, memoryview)):
        raise TypeError(f"key must be bytes, not {type(key).__name__}")
    if isinstance(partition_count, bool) or not isinstance(partition_count, int):
        raise TypeError(f"partition_count must be an int, not {type(partition_count).__name__}")
    if partition_count <= 0:
        raise ValueError(f"partition_count must be > 0, got {partition_count}")
    return partition_with(partitioner, bytes(key), partition_count)


def murmur2(key: bytes, partition_count: int) -> int:
    """Kafka's murmur2 of the key, sign bit cleared, modulo the partition count."""
    return _partition("murmur2", key, partition_count)


def consistent(key: bytes, partition_count: int) -> int:
    """CRC32 of the key modulo the partition count."""
    return _partition("consistent", key, partition_count)


def fnv1a(key: bytes, partition_count: int) -> int:
    """librdkafka's FNV-1a of the key (as Sarama's: the absolute value of the signed 32-bit hash)
    modulo the partition count."""
    return _partition("fnv1a", key, partition_count)
