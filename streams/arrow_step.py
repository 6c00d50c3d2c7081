"""What a ``mapInArrow`` step before a stateful task (:mod:`streams.window_combine`,
:mod:`streams.table_combine`) must keep of the record-by-record run, and how its rows cross.

A record such a step drops or combines is one the task never deserializes, so a value that may
fail to decode is decoded in Spark, where a malformed one still fails the query. The headers cross
as JSON: Spark's Arrow conversion of an array of structs costs ~10 µs a row here (200,000 records
through an identity ``mapInArrow``: 3.0 s with the headers' array, 1.1 s with them as JSON), and
``to_json``/``from_json`` give back the same headers (binary values as base64, a null value as
absent).
"""
from __future__ import annotations

from streams.serdes import BytesSerde, StringSerde
from streams.topology import Node, SubTopology

HEADERS = "ARRAY<STRUCT<key: STRING, value: BINARY>>"
_CANNOT_FAIL = (StringSerde, BytesSerde)     # any bytes read as a value (malformed UTF-8 is replaced)


def lone_source(sub: SubTopology, cache_bytes: int, ops: tuple[str, ...]) -> Node | None:
    """The sub-topology's one source, when a step may combine its records: the record cache is on
    and holds the sub-topology's only store, and the source reads one topic of kind ``ops``,
    without a timestamp extractor, into one processor."""
    if cache_bytes <= 0 or len(sub.sources) != 1 or len(sub.stores) != 1 or not sub.stores[0].caching:
        return None
    src = sub.sources[0]
    consumed = src.args.get("consumed")
    if src.op not in ops or len(src.topics) != 1 or len(src.children) != 1 \
            or (consumed is not None and consumed.timestamp_extractor is not None):
        return None
    return src


def cannot_fail(serde) -> bool:
    """Whether ``serde`` reads any bytes as a value (one that does decodes null only from null)."""
    return isinstance(serde, _CANNOT_FAIL)


def by_partition(table):
    """``table``'s rows per topic-partition, each in offset order (rows of one offset, which a
    ``flatMapValues`` makes, kept in their order: Arrow's sort is stable)."""
    import pyarrow.compute as pc
    pairs = table.select(["topic", "partition"]).group_by(["topic", "partition"]).aggregate([]).to_pylist()
    if len(pairs) == 1:
        yield table.sort_by("offset")
        return
    for p in pairs:
        mask = pc.and_(pc.equal(table["topic"], p["topic"]), pc.equal(table["partition"], p["partition"]))
        yield table.filter(mask).sort_by("offset")


def per_partition(step):
    """``mapInArrow``'s function applying ``step`` (an Arrow table to a table) to each input
    partition's rows of the batches it is given, in offset order (:func:`by_partition`)."""
    def run(batches):
        import pyarrow as pa
        batches = [b for b in batches if b.num_rows]
        if batches:
            for part in by_partition(pa.Table.from_batches(batches)):
                yield from step(part).to_batches()
    return run


def checked_serde(src: Node, defaults: tuple):
    """The source's value serde when a value may fail to decode, else None: a repartition topic
    holds what this application's serdes wrote."""
    vs = src.value_serde or defaults[1]
    return None if src.internal or vs is None or cannot_fail(vs) else vs


def check_column(serde):
    """A column that decodes every value: given to ``mapInArrow``, Spark evaluates it, so a
    malformed value fails the query where it stands, naming its topic, partition and offset."""
    from pyspark.sql import functions as F
    record = (F.col("topic"), F.col("partition"), F.col("offset"))
    return serde.decode(F.col("value"), record=record).isNull().alias("value_null")


def headers_as_json():
    """The ``headers`` column as one JSON string per row (null stays null)."""
    from pyspark.sql import functions as F
    return F.to_json("headers").alias("headers")


def headers_back(df):
    """``df`` with its JSON headers read back into the source's array of (key, value) structs."""
    from pyspark.sql import functions as F
    return df.withColumn("headers", F.from_json("headers", HEADERS))
