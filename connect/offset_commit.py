"""A source connector's offsets, produced by its write's committer in each batch's transaction.

A source connector writes its records with the riverlog sink's streaming write, and its
connect-offsets records (Kafka's KIP-618: the source offsets commit with the records they cover)
are the sink's ``transactionRecords``: the driver's commit calls :func:`transaction_records`,
which reads the batch's end offset from Spark's offset log (written before the batch ran) and maps
it through the connector's ``source_offsets``. A replayed batch that was already decided commits
the recorded attempt and does not call it again.

The commit runs in a Python process of Spark's own, so the connector travels as a pickle
(PySpark's cloudpickle, which carries a class defined in a notebook by value) in the option
``transactionRecords.connector``; a connector that does not pickle is written from
``foreachBatch`` instead (:func:`committer_options` returns None).
"""
from __future__ import annotations

import base64
import dataclasses
from typing import Any

from broker.client import murmur2
from connect.connector_state import batch_end_offset
from connect.storage_format import offset_record

FUNCTION = "connect.offset_commit:transaction_records"

_loaded: dict[str, Any] = {}  # the pickle's text -> the connector, per process


def committer_options(connector, name: str, checkpoint: str, topic: str, partitions: int) -> dict[str, str] | None:
    """The sink options that make its committer write ``connector``'s offsets (None when the
    connector cannot travel to Spark's commit process)."""
    from pyspark import cloudpickle
    portable = type(connector).__new__(type(connector))
    portable.__dict__.update(connector.__dict__)
    portable.context = dataclasses.replace(connector.context, spark=None)
    try:
        blob = base64.b64encode(cloudpickle.dumps(portable)).decode("ascii")
    except Exception:  # noqa: BLE001 - anything unpicklable: the foreachBatch path writes the offsets
        return None
    return {"transactionRecords": FUNCTION, "transactionRecords.connector": blob,
            "transactionRecords.name": name, "transactionRecords.checkpoint": checkpoint,
            "transactionRecords.topic": topic, "transactionRecords.partitions": str(partitions)}


def records(connector, name: str, end_offset: Any, topic: str, partitions: int) -> list[tuple[str, int, bytes, Any]]:
    """connect-offsets records ``(topic, partition, key, value)`` for a batch's end offset."""
    out = []
    for partition, offset in connector.source_offsets(end_offset):
        key, value = offset_record(name, partition, offset)
        out.append((topic, murmur2(key, partitions), key, value))
    return out


def transaction_records(batch_id: int, options: dict[str, str]) -> list[tuple[str, int, bytes, Any]]:
    """The sink's ``transactionRecords`` function: the offsets records of ``batch_id``."""
    blob = options["connector"]
    connector = _loaded.get(blob)
    if connector is None:
        import pickle
        connector = _loaded[blob] = pickle.loads(base64.b64decode(blob))
    end = batch_end_offset(options["checkpoint"], batch_id)
    return records(connector, options["name"], end, options["topic"], int(options["partitions"]))


__all__ = ["FUNCTION", "committer_options", "records", "transaction_records"]
