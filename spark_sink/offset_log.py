"""A micro-batch's input offsets, read from Spark's offset log in the query's checkpoint.

Spark writes ``<checkpointLocation>/offsets/<batchId>`` before the batch runs: a version line, the
batch's metadata, then one line per source, its end offset as that source serialises it (``-`` for
a source without one); in format ``v2`` (``spark.sql.streaming.offsetLog.formatVersion=2``) each
source line is ``<source id>:<offset>``. A riverlog or Kafka source writes
``{"topic": {"partition": offset}}``, the next offset to read: exactly what a consumer group commits.
Read from the driver (the sink's commit or ``foreachBatch``); the checkpoint must be on a file system
this process can open.
"""
from __future__ import annotations

import json
import os
from typing import Any

from broker.errors import InvalidConfigError


def _path(checkpoint: str, batch_id: int) -> str:
    if checkpoint.startswith("file:"):
        checkpoint = checkpoint[len("file:"):]
        if checkpoint.startswith("//"):
            checkpoint = checkpoint[2:]
    elif "://" in checkpoint:
        raise InvalidConfigError(f"checkpointLocation {checkpoint!r} is not a local path: the input offsets of a "
                                 "batch are read from its offset log by the driver", config="checkpointLocation")
    return os.path.join(checkpoint, "offsets", str(batch_id))


def source_offsets(checkpoint: str, batch_id: int) -> list[Any]:
    """Each source's end offset of ``batch_id`` (None: no offset): in the query's source order in
    format v1; in v2 in the order Spark wrote its map of source ids (not the sources' order once
    there are more than four), so a caller with several sources tells them apart by their offsets."""
    with open(_path(checkpoint, batch_id)) as f:
        lines = f.read().splitlines()
    version = lines[0].strip() if lines else ""
    if version not in ("v1", "v2"):
        raise InvalidConfigError(f"the offset log of batch {batch_id} in {checkpoint!r} is in format {version!r}, "
                                 "which this version of Riverlog does not read (it reads v1 and v2)",
                                 config="spark.sql.streaming.offsetLog.formatVersion")
    if version == "v2":   # "<source id>:<offset>", the id before the first ':' (as Spark splits it)
        lines = [*lines[:2], *(line.partition(":")[2] for line in lines[2:])]
    return [None if line.strip() in ("", "-") else json.loads(line) for line in lines[2:]]


def topic_offsets(checkpoint: str, batch_id: int) -> tuple[tuple[str, int, int], ...]:
    """The batch's end offsets of every topic-shaped source, as sorted ``(topic, partition,
    nextOffsetToRead)``; a source whose offset is not ``{"topic": {"partition": offset}}`` is left out."""
    out: dict[tuple[str, int], int] = {}
    for offset in source_offsets(checkpoint, batch_id):
        if not isinstance(offset, dict):
            continue
        for topic, partitions in offset.items():
            if not isinstance(partitions, dict):
                continue
            for p, o in partitions.items():
                if str(p).lstrip("-").isdigit() and isinstance(o, int) and o >= 0:
                    out[(str(topic), int(p))] = max(o, out.get((str(topic), int(p)), 0))
    return tuple((t, p, o) for (t, p), o in sorted(out.items()))


__all__ = ["source_offsets", "topic_offsets"]
