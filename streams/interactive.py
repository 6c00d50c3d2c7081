"""Interactive queries: a store read from its committed changelog, so any process can query a
running application (a client-side materialised view; Kafka Streams serves it from the
instance's RocksDB, which a Spark executor's store is not reachable as).

Each partition is read from its log start up to its last stable offset, taken once before the
read begins (Kafka's ``StoreChangelogReader`` restores a store up to the end offset it listed
with ``read_committed`` the same way). An empty fetch does not end a partition: only reaching
that offset does, so a slow broker gives a slow answer, never a partial store. A read that makes
no progress for ``timeout`` seconds raises :class:`~broker.errors.KafkaTimeoutError`.
"""
from __future__ import annotations

import time

from broker.client import AdminClient, Consumer, IsolationLevel, OffsetSpec, TopicPartition
from broker.errors import KafkaTimeoutError
from streams.state_codec import decode_key, decode_value
from streams.stores import WINDOW_SIZE_KEY, DictBacking, StoreSpec


def read_store(client: dict, topic: str, spec: StoreSpec, timeout: float = 30.0, only: int | None = None,
               key_serde=None, timestamped: bool = False):
    """The store as of the last committed batch: the changelog's latest entry per key (of the
    partition ``only`` when given: a global store's changelog holds one full copy per task).
    ``key_serde`` (default: the spec's) orders keys by their serialized bytes, as Kafka's stores;
    ``timestamped`` gives values as ``ValueAndTimestamp``."""
    from streams.read_only_stores import ReadOnlyStore
    return ReadOnlyStore(spec.name, [spec.open(b) for b in read_changelog(client, topic, timeout, only, spec.name)],
                         timestamped=timestamped, kind=spec.kind, key_serde=key_serde or spec.key_serde)


def store_kind(backings: list[DictBacking]) -> str | None:
    """The kind of store a changelog holds, told by its entries' tags (None: it is empty)."""
    tags = {"k": "keyValue", "w": "window", "s": "session"}
    for b in backings:
        for key in b.data:
            if isinstance(key, tuple) and key and key[0] in tags:
                return tags[key[0]]
    return None


def window_size(backings: list[DictBacking]) -> int | None:
    """The window size a window store's writer recorded in its changelog (None: not recorded, as
    in a changelog written before the size was, or by a stream-stream join's store)."""
    sizes = {b.data[WINDOW_SIZE_KEY] for b in backings if WINDOW_SIZE_KEY in b.data}
    return sizes.pop() if len(sizes) == 1 else None


def read_changelog(client: dict, topic: str, timeout: float = 30.0, only: int | None = None,
                   store: str | None = None) -> list[DictBacking]:
    """One backing per partition of ``topic``: its latest committed entry per key, read up to the
    last stable offset each partition had when the read began. A topic that does not exist raises
    KeyError (asked through the admin client: a consumer's metadata request would create it); a
    partition ``only`` it does not have, Kafka's ``InvalidStateStorePartitionException``.
    ``timeout``: seconds each request, and the read of a partition between two advances of its
    position, may take before :class:`KafkaTimeoutError` is raised."""
    admin = AdminClient(client)
    try:
        md = admin.list_topics(timeout=timeout)
        if topic not in md.topics:
            raise KeyError(topic)
        if only is not None and only not in md.topics[topic].partitions:
            from streams.errors import InvalidStateStorePartitionError
            raise InvalidStateStorePartitionError(f"The specified partition {only} for store {store or topic} "
                                                  f"does not exist.")
        partitions = sorted(md.topics[topic].partitions) if only is None else [only]
        bounds = _bounds(admin, topic, partitions, timeout)
    finally:
        admin.close()
    # auto.offset.reset=earliest: records deleted under the reader leave what remains, never a jump to the end
    c = Consumer({**client, "group.id": f"{topic}-query", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    try:
        return [_read_partition(c, topic, p, *bounds[p], timeout) for p in partitions]
    finally:
        c.close()


def _bounds(admin: AdminClient, topic: str, partitions: list[int], timeout: float) -> dict[int, tuple[int, int]]:
    """Per partition (log start offset, last stable offset): ``read_committed``'s end of the log."""
    tps = [TopicPartition(topic, p) for p in partitions]
    out = {}
    for spec, level in ((OffsetSpec.earliest(), IsolationLevel.READ_UNCOMMITTED),
                        (OffsetSpec.latest(), IsolationLevel.READ_COMMITTED)):
        futures = admin.list_offsets({tp: spec for tp in tps}, isolation_level=level, request_timeout=timeout)
        for tp, f in futures.items():
            out.setdefault(tp.partition, []).append(f.result(timeout).offset)
    return {p: tuple(v) for p, v in out.items()}


def apply_changelog_record(backing: DictBacking, key: bytes, value: bytes | None) -> None:
    """One changelog record onto the backing a query rebuilds: the key's latest entry, a
    tombstone (None) removing it, so a deleted key is never seen."""
    decoded = decode_key(key)
    if value is None:
        backing.data.pop(decoded, None)
    else:
        backing.data[decoded] = decode_value(value)


def _read_partition(c: Consumer, topic: str, p: int, start: int, end: int, timeout: float) -> DictBacking:
    """Partition ``p`` from ``start`` until the position reaches ``end``. Transaction markers and
    aborted records move the position without a record, so the position, not the last record
    read, tells when the partition is done."""
    backing = DictBacking()
    if end <= start:
        return backing
    c.assign([TopicPartition(topic, p, start)])
    position, deadline = start, time.monotonic() + timeout
    while position < end:
        msgs = c.consume(1000, timeout=max(0.0, min(1.0, deadline - time.monotonic())))
        reached = position
        for m in msgs:
            if m.error() or m.partition() != p:
                continue
            reached = max(reached, m.offset() + 1)
            if m.offset() >= end:     # committed after the read began: the next query shows it
                continue
            apply_changelog_record(backing, m.key(), m.value())
        reached = max(reached, c.position([TopicPartition(topic, p)])[0].offset)
        if reached > position:
            position, deadline = reached, time.monotonic() + timeout
        elif time.monotonic() >= deadline:
            raise KafkaTimeoutError(
                f"reading changelog {topic!r} partition {p}: no progress for {timeout:g} s at offset {position} "
                f"of {end} (its last stable offset when the query began); the broker is slow or unreachable: "
                f"retry, or give a longer timeout")
    return backing
