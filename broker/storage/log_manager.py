"""All partition logs under one data directory.

Layout: ``<log.dirs>/<topic>-<partition>/`` per partition, each with a ``partition.metadata`` file
naming the topic id it belongs to, so a topic deleted and re-created under the same name never
inherits old data. A deleted partition is first renamed to ``<dir>.<topic id>-delete`` (atomic)
and then removed; leftovers of a crash between the two are removed at start-up.
``.clean-shutdown`` is written after every log was flushed on a clean stop and removed at start;
without it, logs are recovered (scanned from their recovery point).

Threading: the broker calls create/delete under its metadata lock.
"""
from __future__ import annotations

import logging
import os
import shutil

from broker.clock import Clock
from broker.config import Config
from broker.storage.checkpoint import fsync_dir, write_atomically
from broker.storage.log import Log

log = logging.getLogger(__name__)

CLEAN_SHUTDOWN_FILE = ".clean-shutdown"
PARTITION_METADATA_FILE = "partition.metadata"


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


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
            if name.endswith("-delete"):
                shutil.rmtree(os.path.join(data_dir, name), ignore_errors=True)

    def existing(self) -> dict[str, str]:
        """Partition directory name -> topic id recorded in it."""
        found = {}
        for name in os.listdir(self.data_dir):
            path = os.path.join(self.data_dir, name, PARTITION_METADATA_FILE)
            if os.path.isfile(path):
                with open(path, encoding="utf-8") as f:
                    found[name] = f.read().strip()
        return found

    def open_log(self, topic: str, partition: int, topic_id: str, config: Config) -> Log:
        directory = os.path.join(self.data_dir, partition_dir_name(topic, partition))
        new = not os.path.isdir(directory)
        log_ = Log.open(directory, config, self.clock, clean_shutdown=self.clean_shutdown or new)
        meta = os.path.join(directory, PARTITION_METADATA_FILE)
        if new or not os.path.exists(meta):
            write_atomically(meta, topic_id.encode())
        return log_

    def remove_dir(self, dir_name: str, topic_id: str) -> None:
        source = os.path.join(self.data_dir, dir_name)
        if not os.path.isdir(source):
            return
        target = f"{source}.{topic_id}-delete"
        os.replace(source, target)
        fsync_dir(self.data_dir)
        shutil.rmtree(target, ignore_errors=True)

    def mark_clean_shutdown(self) -> None:
        write_atomically(os.path.join(self.data_dir, CLEAN_SHUTDOWN_FILE), b"")


def _has_logs(data_dir: str) -> bool:
    return any(os.path.isdir(os.path.join(data_dir, n)) for n in os.listdir(data_dir))
