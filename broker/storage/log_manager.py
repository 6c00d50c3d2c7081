"""All partition logs under one data directory.

Layout: ``<log.dirs>/<topic>-<partition>/`` per partition, each with a ``partition.metadata`` file
naming the topic id it belongs to, so a topic deleted and re-created under the same name never
inherits old data. A deleted partition is first renamed to ``<topic>-<partition>.<topic id>-delete``
(atomic) and then removed; leftovers of a crash between the two are removed at start-up. As in
Kafka, the topic part of a renamed directory is cut short so the whole name fits a file name
(255 bytes): a legal topic name has up to 249 characters, and the suffix adds 40 and more
(:func:`renamed_dir_name`). Renamed directories are recognised by their suffix, never by the
topic part, so names cut short and full-length names left by older versions parse alike.
``.clean-shutdown`` is written after every log was flushed on a clean stop and removed at start;
without it, logs are recovered (scanned from their recovery point).

Threading: the broker calls create/delete under its metadata lock.
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import uuid

from broker.clock import Clock
from broker.config import Config
from broker.errors import KafkaStorageError
from broker.storage.checkpoint import fsync_dir, write_atomically
from broker.storage.log import Log

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".clean-shutdown"
PARTITION_METADATA_FILE = "partition.metadata"


MAX_FILE_NAME_BYTES = 255
DELETE_SUFFIX = "delete"
FUTURE_SUFFIX = "future"
STRAY_SUFFIX = "stray"
_RENAMED = re.compile(r"^(?P<topic>.*)-(?P<partition>\d+)\.(?P<id>[0-9A-Za-z]+)-(?P<suffix>delete|future|stray)$")


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a partition directory's name, else None (renamed or foreign entries)."""
    if parse_renamed_dir(name) is not None:
        return None
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return topic, int(partition)


def renamed_dir_name(topic: str, partition: int, unique_id: str, suffix: str) -> str:
    """``<topic>-<partition>.<unique id>-<suffix>``, the topic cut short so the name fits 255 bytes.

    Kafka's ``logDirNameWithSuffixCappedLength``: the partition, id and suffix are kept whole (they
    are what :func:`parse_renamed_dir` reads back); only the topic part shrinks. Topic names are
    ASCII, but the cut is made on bytes so the bound holds for any name.
    """
    tail = f"-{partition}.{unique_id}-{suffix}"
    room = MAX_FILE_NAME_BYTES - len(tail.encode())
    if room < 0:
        raise ValueError(f"renamed directory suffix {tail!r} alone is longer than {MAX_FILE_NAME_BYTES} bytes")
    head = topic.encode()[:room].decode("utf-8", errors="ignore")
    return head + tail


def parse_renamed_dir(name: str) -> tuple[str, int, str, str] | None:
    """(topic or its cut-short prefix, partition, unique id, suffix) of a renamed directory, else None."""
    found = _RENAMED.match(name)
    if found is None:
        return None
    return found["topic"], int(found["partition"]), found["id"], found["suffix"]


class LogManager:
    def __init__(self, data_dir: str, clock: Clock):
        self.data_dir = data_dir
        self.clock = clock
        os.makedirs(data_dir, exist_ok=True)
        marker = os.path.join(data_dir, CLEAN_SHUTDOWN_FILE)
        self.clean_shutdown = os.path.exists(marker) or not _has_logs(data_dir)
        if os.path.exists(marker):
            os.unlink(marker)
            fsync_dir(data_dir)
        for name in os.listdir(data_dir):
            renamed = parse_renamed_dir(name)
            if renamed is not None and renamed[3] == DELETE_SUFFIX:
                shutil.rmtree(os.path.join(data_dir, name), ignore_errors=True)

    def existing(self) -> dict[tuple[str, int], str]:
        """(topic, partition) -> topic id recorded in its directory (renamed directories are not partitions)."""
        found = {}
        for name in os.listdir(self.data_dir):
            key = parse_partition_dir(name)
            recorded = _read_topic_id(os.path.join(self.data_dir, name)) if key is not None else None
            if recorded is not None:
                found[key] = recorded
        return found

    def open_log(self, topic: str, partition: int, topic_id: str, config: Config) -> Log:
        """Open (or create) the partition's log; refuses a directory left by another topic of the
        same name (one whose removal failed), so a re-created topic never inherits its data."""
        directory = os.path.join(self.data_dir, partition_dir_name(topic, partition))
        new = not os.path.isdir(directory)
        recorded = _read_topic_id(directory)
        if recorded and recorded != topic_id:
            raise KafkaStorageError(
                f"{directory} belongs to topic id {recorded}, not {topic_id}: an earlier topic named "
                f"'{topic}' was not removed; remove the directory and restart the broker")
        log_ = Log.open(directory, config, self.clock, clean_shutdown=self.clean_shutdown or new)
        meta = os.path.join(directory, PARTITION_METADATA_FILE)
        if new or not os.path.exists(meta):
            write_atomically(meta, topic_id.encode())
        return log_

    def remove_dir(self, topic: str, partition: int, topic_id: str) -> None:
        """Rename the partition's directory to its ``-delete`` name, then remove it."""
        source = os.path.join(self.data_dir, partition_dir_name(topic, partition))
        if not os.path.isdir(source):
            return
        # The topic id names the directory (as the partition.metadata it came from); a random id when
        # that is unusable or a leftover already holds the name, as Kafka always does.
        unique = topic_id if re.fullmatch(r"[0-9A-Za-z]+", topic_id or "") else uuid.uuid4().hex
        target = os.path.join(self.data_dir, renamed_dir_name(topic, partition, unique, DELETE_SUFFIX))
        if os.path.exists(target):
            target = os.path.join(self.data_dir, renamed_dir_name(topic, partition, uuid.uuid4().hex, DELETE_SUFFIX))
        os.replace(source, target)
        fsync_dir(self.data_dir)
        shutil.rmtree(target, ignore_errors=True)

    def mark_clean_shutdown(self) -> None:
        write_atomically(os.path.join(self.data_dir, CLEAN_SHUTDOWN_FILE), b"")


def _read_topic_id(directory: str) -> str | None:
    path = os.path.join(directory, PARTITION_METADATA_FILE)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return f.read().strip()


def _has_logs(data_dir: str) -> bool:
    return any(os.path.isdir(os.path.join(data_dir, n)) for n in os.listdir(data_dir))
