"""An offset per partition, kept in one small file of the data directory (Kafka's
``OffsetCheckpointFile``). The broker keeps each hosted partition's high watermark in
``<log.dirs>/replication-offset-checkpoint`` so a restart does not start it again at the log start.

Layout (Kafka's checkpoint text format, UTF-8, ``\\n`` endings)::

    0                 <- format version
    2                 <- number of entries
    orders 0 1500     <- "topic partition offset", separated by a space
    orders 1 1488

Writing and crashes: the whole file is written to ``<file>.tmp``, fsynced, renamed over the old one
and the directory fsynced (:mod:`broker.storage.checkpoint`), so a reader finds the complete old or
new file, never a mix. An empty or missing file, or one holding only the version line, has no
entries (as Kafka reads it). Anything else that does not parse (another version, a count that does
not match the lines, a line that is not ``topic partition offset``) raises
:class:`~broker.errors.KafkaStorageError` naming the file and line: it can only come from a
damaged disk or a hand edit, and what to do then is the caller's decision.

Pure apart from :func:`read_offset_checkpoint` and :func:`write_offset_checkpoint`.

    write_offset_checkpoint(path, {("orders", 0): 1500})
    read_offset_checkpoint(path)   # {("orders", 0): 1500}
"""
from __future__ import annotations

import os
from collections.abc import Mapping

from broker.errors import KafkaStorageError
from broker.storage.checkpoint import write_atomically

REPLICATION_OFFSET_CHECKPOINT_FILE = "replication-offset-checkpoint"
FORMAT_VERSION = 0

Offsets = dict[tuple[str, int], int]


def format_offsets(offsets: Mapping[tuple[str, int], int]) -> bytes:
    """The file's bytes for ``offsets`` ((topic, partition) -> offset), entries sorted."""
    lines = [str(FORMAT_VERSION), str(len(offsets))]
    for (topic, partition), offset in sorted(offsets.items()):
        if not topic or any(c.isspace() for c in topic):
            raise ValueError(f"topic name {topic!r} cannot be written to an offset checkpoint: "
                             "it must be non-empty and hold no whitespace")
        lines.append(f"{topic} {int(partition)} {int(offset)}")
    return ("\n".join(lines) + "\n").encode()


def parse_offsets(data: bytes, path: str = "<offset checkpoint>") -> Offsets:
    """The entries of a checkpoint file's bytes; raises KafkaStorageError when they do not parse."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise KafkaStorageError(f"offset checkpoint {path} is not UTF-8 text; the disk holding it is "
                                "damaged") from None
    lines = [line.rstrip("\r") for line in text.split("\n")]
    if lines[-1] == "":
        lines.pop()
    if not lines:
        return {}
    version = _int(lines[0], path, 1)
    if version != FORMAT_VERSION:
        raise KafkaStorageError(f"offset checkpoint {path} has version {version}; only {FORMAT_VERSION} "
                                "is known")
    if len(lines) == 1:
        return {}
    count = _int(lines[1], path, 2)
    entries = lines[2:]
    if len(entries) != count:
        raise KafkaStorageError(f"offset checkpoint {path} declares {count} entries but holds {len(entries)}")
    offsets: Offsets = {}
    for n, line in enumerate(entries, start=3):
        parts = line.split()
        try:
            if len(parts) != 3:
                raise ValueError
            topic, partition, offset = parts[0], int(parts[1]), int(parts[2])
        except ValueError:
            raise KafkaStorageError(f"offset checkpoint {path} line {n} is {line!r}; expected "
                                    "'topic partition offset'") from None
        offsets[(topic, partition)] = offset
    return offsets


def read_offset_checkpoint(path: str) -> Offsets:
    """The entries of the file at ``path`` (none when it does not exist)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return {}
    return parse_offsets(data, path)


def write_offset_checkpoint(path: str, offsets: Mapping[tuple[str, int], int]) -> None:
    """Replace the file at ``path`` with ``offsets``, atomically and durably."""
    write_atomically(path, format_offsets(offsets))


def checkpoint_path(data_dir: str) -> str:
    return os.path.join(data_dir, REPLICATION_OFFSET_CHECKPOINT_FILE)


def _int(line: str, path: str, n: int) -> int:
    try:
        return int(line.strip())
    except ValueError:
        raise KafkaStorageError(f"offset checkpoint {path} line {n} is {line!r}; expected a number") from None
