"""Producer ids for idempotent producers, from blocks the active controller hands out.

Each broker takes a block of ids at a time (Kafka's KIP-730); the controller records the next free
id in the metadata log, so no two brokers, nor one broker before and after a restart, ever give
out the same id.
"""
from __future__ import annotations

import threading


class ProducerIdManager:
    def __init__(self, broker):
        self.broker = broker
        self._lock = threading.Lock()
        self._next = 0
        self._end = 0

    def next_id(self) -> int:
        with self._lock:
            if self._next >= self._end:
                reply = self.broker.controller_call("allocate_producer_ids", {"node_id": self.broker.node_id})
                self._next, self._end = reply["start"], reply["end"]
            pid = self._next
            self._next += 1
            return pid
