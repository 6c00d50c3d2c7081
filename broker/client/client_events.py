"""What a client reports besides records: ``error_cb``, ``stats_cb``, ``logger`` and ``debug``.

As in confluent-kafka, callbacks run on the application's thread, inside ``poll()`` (and
``flush()``, ``consume()``): background threads only queue errors here. ``error_cb(err)`` receives
client-level errors (a fatal producer error such as being fenced, a group membership failure, a
failed automatic commit) as :class:`~broker.errors.KafkaError`; ``stats_cb(json_str)`` receives a
JSON document in librdkafka's top-level shape (``name``, ``client_id``, ``type``, ``ts``,
``time``, ``msg_cnt``, ``msg_size``, ``topics`` ...) every ``statistics.interval.ms``.

``logger`` receives the log records of Riverlog's client modules while this client is open;
``debug`` turns the loggers of its librdkafka contexts (``consumer``, ``cgrp``, ``eos``...) to DEBUG.
"""
from __future__ import annotations

import collections
import json
import logging
import threading
import time

from broker.client.config import DEBUG_CONTEXTS
from broker.errors import KafkaError


class _Forward(logging.Handler):
    """Hands a client module's log records to the application's logger."""

    def __init__(self, target: logging.Logger):
        super().__init__(logging.DEBUG)
        self.target = target

    def emit(self, record: logging.LogRecord) -> None:
        if self.target.isEnabledFor(record.levelno):
            self.target.handle(record)


class ClientEvents:
    """One client's error, statistics and log plumbing. ``stats()`` builds the statistics dict."""

    def __init__(self, cfg, kind: str, stats=None, clock=time.monotonic):
        self.error_cb = cfg["error_cb"]
        self.stats_cb = cfg["stats_cb"]
        self.interval = cfg["statistics.interval.ms"] / 1000.0
        self.kind = kind
        self.client_id = cfg["client.id"]
        self._stats = stats
        self._clock = clock
        self._next_stats = clock() + self.interval
        self._errors: collections.deque = collections.deque()
        self._lock = threading.Lock()
        self.wake = None  # the owner's: wakes a poll() waiting, so error_cb runs from it at once (librdkafka's)
        self._handler = None
        self._debugged: list[tuple[logging.Logger, int]] = []
        if cfg["logger"] is not None:
            self._handler = _Forward(cfg["logger"])
            logging.getLogger("broker.client").addHandler(self._handler)
        for context in filter(None, (c.strip() for c in cfg["debug"].split(","))):
            for name in DEBUG_CONTEXTS[context]:
                logger = logging.getLogger(name)
                self._debugged.append((logger, logger.level))
                logger.setLevel(logging.DEBUG)

    def error(self, error) -> None:
        """Queue a client-level error for ``error_cb`` (any thread); logged when there is none."""
        if self.error_cb is None:
            logging.getLogger("broker.client").warning("%s error: %s", self.kind, error)
            return
        with self._lock:
            self._errors.append(KafkaError.of(error))
        if self.wake is not None:
            self.wake()

    @property
    def pending(self) -> bool:
        """An error waits for ``error_cb``."""
        return bool(self._errors)

    def serve(self) -> int:
        """Run queued error callbacks and a due stats callback (the application's thread)."""
        served = 0
        while self._errors:
            with self._lock:
                if not self._errors:
                    break
                err = self._errors.popleft()
            self.error_cb(err)
            served += 1
        if self.stats_cb is not None and self.interval > 0 and self._clock() >= self._next_stats:
            self._next_stats = self._clock() + self.interval
            self.stats_cb(json.dumps(self.statistics()))
            served += 1
        return served

    def statistics(self) -> dict:
        now = time.time()
        out = {"name": f"{self.client_id}#{self.kind}", "client_id": self.client_id, "type": self.kind,
               "ts": int(time.monotonic() * 1e6), "time": int(now), "age": 0, "msg_cnt": 0, "msg_size": 0,
               "brokers": {}, "topics": {}}
        if self._stats is not None:
            out.update(self._stats())
        return out

    def close(self) -> None:
        if self._handler is not None:
            logging.getLogger("broker.client").removeHandler(self._handler)
            self._handler = None
        for logger, level in reversed(self._debugged):
            logger.setLevel(level)
        self._debugged = []
