"""What ``produce()`` accepts, checked and normalised as confluent-kafka's argument parsing does:
the same types pass and the same TypeError/OverflowError messages refuse the rest, before a
record reaches the accumulator (where a bad one could only fail later, in the background)."""
from __future__ import annotations

import operator

import pyarrow as pa

from broker.errors import UnknownPartitionError

_INT32_MAX = 2**31 - 1


def type_name(value) -> str:
    return "None" if value is None else type(value).__name__


def as_bytes(data) -> bytes:
    if isinstance(data, str):
        return data.encode()
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"a bytes-like object is required, not '{type(data).__name__}'")


def as_timestamp(timestamp) -> int:
    """An int64 of milliseconds, as confluent-kafka's ``produce`` parses it (a float is refused)."""
    timestamp = operator.index(timestamp)
    if not -2**63 <= timestamp < 2**63:
        raise OverflowError("timestamp does not fit in a 64-bit integer")
    return timestamp


def as_header_list(headers) -> list:
    """``headers`` checked and normalised to [(str, bytes | None)], with confluent-kafka's
    TypeErrors: a dict or a list (or tuple) of (key, value) tuples; keys str (bytes are decoded,
    anything else is made a str, as librdkafka's binding does); values None, bytes or str."""
    if isinstance(headers, dict):
        items = headers.items()
    elif isinstance(headers, (list, tuple)):
        items = headers
        if not all(type(h) is tuple and len(h) == 2 for h in headers):
            raise TypeError("Headers are expected to be a list of (key, value) tuples")
    else:
        raise TypeError(f"expected headers to be dict or list of (key, value) tuples, not {type(headers).__name__}")
    return [(_header_key(k), _header_value(v)) for k, v in items]


def _header_key(key) -> str:
    if type(key) is str:
        return key
    if isinstance(key, (bytes, bytearray)):
        try:
            return bytes(key).decode()
        except UnicodeDecodeError:
            raise TypeError("expected header key to be unicode string") from None
    return str(key)


def _header_value(value):
    if value is None or type(value) is bytes:
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"expected header value to be None, binary, or unicode string, not {type(value).__name__}")


def check_batch(messages) -> None:
    """``produce_batch``'s ``messages``: a list of dicts (or an Arrow table or record batch, Riverlog's
    bulk path), each dict checked before any record is queued, with confluent-kafka's errors: a
    TypeError names the first bad entry's index, bad headers a ValueError; nothing is queued then."""
    if isinstance(messages, (pa.Table, pa.RecordBatch)):
        return
    if not isinstance(messages, list):
        raise TypeError("messages must be a list")
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise TypeError(f"Message at index {i} must be a dict")
        for field in ("value", "key"):
            if m.get(field) is not None and not isinstance(m[field], (bytes, str, bytearray, memoryview)):
                raise TypeError(f"Message {field} at index {i} must be bytes or str")
        partition = m.get("partition")
        if partition is not None and (isinstance(partition, bool) or not isinstance(partition, int)):
            raise TypeError(f"Message partition at index {i} must be int")
        if m.get("headers") is not None:
            try:
                as_header_list(m["headers"])
            except TypeError:
                raise ValueError(f"Invalid headers at index {i}") from None


def check_partition(topics: dict, topic: str, partition: int) -> None:
    """An explicit partition checked as librdkafka's ``rd_kafka_msg_partitioner`` checks it at
    produce(): outside int32 refused as confluent-kafka's argument parsing refuses it
    (OverflowError); one the topic does not have (below -1, or at or past its partition count) is
    _UNKNOWN_PARTITION, raised now if the topic's metadata (``topics``) is cached, else the sender
    fails it on delivery. -1 (RD_KAFKA_PARTITION_UA) is the partitioner's to place."""
    if partition > _INT32_MAX:
        raise OverflowError("signed integer is greater than maximum")
    if partition < -_INT32_MAX - 1:
        raise OverflowError("signed integer is less than minimum")
    if partition == -1:
        return
    info = topics.get(topic)
    if info is not None and not 0 <= partition < len(info.partitions):
        raise UnknownPartitionError(
            f"topic '{topic}' has {len(info.partitions)} partition(s); partition {partition} does not exist")
