"""Interactive queries: a store read from its committed changelog, so any process can query a
running application (a client-side materialised view; Kafka Streams serves it from the
instance's RocksDB, which a Spark executor's store is not reachable as)."""
from __future__ import annotations

from broker.client import AdminClient, Consumer, TopicPartition
from streams.state_codec import decode_key, decode_value
from streams.stores import DictBacking, StoreSpec


def read_store(client: dict, topic: str, spec: StoreSpec, timeout: float = 30.0, only: int | None = None):
    """The store as of the last committed batch: the changelog's latest entry per key (of the
    partition ``only`` when given: a global store's changelog holds one full copy per task)."""
    from streams.testing import ReadOnlyStore
    return ReadOnlyStore(spec.name, [spec.open(b) for b in read_changelog(client, topic, timeout, only)],
                         kind=spec.kind)


def store_kind(backings: list[DictBacking]) -> str | None:
    """The kind of store a changelog holds, told by its entries' tags (None: it is empty)."""
    tags = {"k": "keyValue", "w": "window", "s": "session"}
    for b in backings:
        for key in b.data:
            if isinstance(key, tuple) and key and key[0] in tags:
                return tags[key[0]]
    return None


def read_changelog(client: dict, topic: str, timeout: float = 30.0, only: int | None = None) -> list[DictBacking]:
    """One backing per partition of ``topic``: its latest committed entry per key. A topic that
    does not exist raises KeyError (asked through the admin client: a consumer's metadata request
    would create it)."""
    admin = AdminClient(client)
    try:
        if topic not in admin.list_topics(timeout=timeout).topics:
            raise KeyError(topic)
    finally:
        admin.close()
    c = Consumer({**client, "group.id": f"{topic}-query", "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    backings: list[DictBacking] = []
    try:
        md = c.list_topics(topic, timeout=timeout)
        partitions = sorted(md.topics[topic].partitions) if only is None else [only]
        for p in partitions:
            backing = DictBacking()
            low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
            if high > low:
                c.assign([TopicPartition(topic, p, low)])
                done = False
                while not done:
                    msgs = c.consume(1000, timeout=1.0)
                    if not msgs:
                        # read_committed stops at the last stable offset: what is left is not committed yet
                        position = c.position([TopicPartition(topic, p)])[0].offset
                        done = position >= high or position < 0 or not msgs
                    for m in msgs:
                        if m.error():
                            continue
                        key = decode_key(m.key())
                        if m.value() is None:
                            backing.data.pop(key, None)
                        else:
                            backing.data[key] = decode_value(m.value())
                        if m.offset() + 1 >= high:
                            done = True
                    if msgs and not done:   # transaction markers end a partition without a record
                        done = c.position([TopicPartition(topic, p)])[0].offset >= high
            backings.append(backing)
    finally:
        c.close()
    return backings
