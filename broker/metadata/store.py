"""The metadata log kept on this node's disk: ``__cluster_metadata-0``.

Records (see ``image.py``) are JSON values in ordinary record batches appended to a partition log,
so the metadata log gets the same CRCs, torn-tail recovery and tooling as any topic. Each write is
fsynced before it is applied: metadata is small and must survive a crash. Loading replays the log.

Threading: callers hold the store's lock (``store.lock``) around ``append`` and reads of ``image``.
"""
from __future__ import annotations

import json
import os
import threading

from broker.clock import Clock
from broker.config import TOPIC_CONFIG
from broker.metadata.image import MetadataImage
from broker.records.arrow_body import decode_body, encode_batch, record_batch
from broker.records.batch import HEADER_SIZE, iter_headers, validate_batches
from broker.storage.log import Log

METADATA_TOPIC = "__cluster_metadata"


class MetadataStore:
    def __init__(self, data_dir: str, clock: Clock, clean_shutdown: bool):
        self.lock = threading.RLock()
        self.clock = clock
        config = TOPIC_CONFIG.parse({"segment.bytes": 8 * 1024 * 1024})
        self.log = Log.open(os.path.join(data_dir, f"{METADATA_TOPIC}-0"), config, clock, clean_shutdown)
        self.image = MetadataImage()
        for record in self._replay():
            self.image.apply(record)

    def _replay(self):
        offset = self.log.log_start_offset
        while offset < self.log.log_end_offset:
            data = self.log.read(offset, 1 << 20)
            if data is None:
                break
            for pos, header in iter_headers(data):
                values = decode_body(data[pos + HEADER_SIZE: pos + header.size]).column(1).to_pylist()
                yield from (json.loads(v) for v in values)
                offset = header.next_offset

    def append(self, records: list[dict]) -> None:
        """Durably append ``records`` (all or none), then apply them to the image."""
        now = self.clock.time_ms()
        values = [json.dumps(r, sort_keys=True).encode() for r in records]
        data = encode_batch(record_batch([None] * len(values), values, [now] * len(values)))
        self.log.append(data, validate_batches(data, max_batch_bytes=1 << 30))
        self.log.flush()
        for record in records:
            self.image.apply(record)

    def close(self) -> None:
        self.log.close()
