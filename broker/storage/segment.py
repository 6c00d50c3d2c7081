"""A log segment: ``<base offset>.log`` holding batches back to back, plus its two indexes.

The .log file is nothing but framed batches (``broker.records.batch``), each already carrying its
offsets, so the file alone is the truth and both indexes can be rebuilt from it. After an unclean
shutdown the file may end in a torn batch or garbage: :meth:`LogSegment.recover` walks it, checking
every length, magic, CRC and that offsets only grow, truncates at the first batch that fails, and
rebuilds both indexes.

Threading: not thread-safe. The Log serialises appends, truncation and deletion; reads go through
``os.pread`` and only look below the size the segment had when they started.
"""
from __future__ import annotations

import logging
import mmap
import os
from typing import NamedTuple

from broker.errors import CorruptRecordError
from broker.records.batch import (HEADER_SIZE, MAGIC_ARROW, MAGIC_KAFKA_V2, BatchHeader,
                                  compute_crc, iter_headers, parse_header)
from broker.storage.offset_index import OffsetIndex
from broker.storage.time_index import TimeIndex

log = logging.getLogger(__name__)

_KNOWN_MAGIC = (MAGIC_ARROW, MAGIC_KAFKA_V2)


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


class BatchPosition(NamedTuple):
    position: int
    header: BatchHeader


class LogSegment:
    def __init__(self, directory: str, base_offset: int, index_interval: int, created_ms: int,
                 suffix: str = ""):
        """``suffix`` names a segment that is not part of the log yet (the cleaner's ``.cleaned``)."""
        self.base_offset = base_offset
        self.index_interval = index_interval
        self.created_ms = created_ms
        stem = os.path.join(directory, segment_name(base_offset))
        self.log_path = stem + ".log" + suffix
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.offset_index = OffsetIndex(stem + ".index" + suffix, base_offset)
        self.time_index = TimeIndex(stem + ".timeindex" + suffix, base_offset)
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.first_timestamp = -1  # the first batch's max timestamp; drives segment.ms
        self._bytes_since_index = 0
        self.truncated_bytes = 0
        # Times truncate_to cut this segment: a clean planned before a cut must not swap its
        # output in, even if appends brought the segment back to the size the plan saw.
        self.truncations = 0

    # ----------------------------------------------------------------------------------- opening
    @classmethod
    def open(cls, directory: str, base_offset: int, index_interval: int, now_ms: int,
             recover: bool) -> "LogSegment":
        """Open an existing segment; scan and repair it when ``recover`` or its indexes look wrong."""
        segment = cls(directory, base_offset, index_interval, now_ms)
        if recover or not segment._load_indexes():
            segment.truncated_bytes = segment.recover()
            if segment.truncated_bytes:
                log.warning("truncated %d bytes of torn or corrupt data from %s",
                            segment.truncated_bytes, segment.log_path)
        if segment.size:
            segment.first_timestamp = parse_header(os.pread(segment.fd, HEADER_SIZE, 0)).max_timestamp
        return segment

    def time_waited_for_roll(self, now_ms: int, incoming_max_timestamp: int) -> int:
        """As Kafka: record time since the first batch when timestamps exist, else wall time since
        creation. Record time keeps a restart from postponing a roll and old timestamps from forcing one."""
        if self.first_timestamp >= 0:
            return incoming_max_timestamp - self.first_timestamp
        return now_ms - self.created_ms

    def largest_timestamp(self) -> int:
        """The newest record time, or the .log file's last-modified time when no record carries
        one (all NO_TIMESTAMP, -1), as Kafka's ``LogSegment.largestTimestamp``: retention by
        ``retention.ms`` must not take a segment without record times for infinitely old."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return (os.fstat(self.fd) if self.fd >= 0 else os.stat(self.log_path)).st_mtime_ns // 1_000_000

    def _load_indexes(self) -> bool:
        """Trust the index files if they agree with the log; returns False when a rebuild is due."""
        offsets = OffsetIndex.load(self.offset_index.path, self.base_offset)
        times = TimeIndex.load(self.time_index.path, self.base_offset)
        if offsets is None or times is None:
            return False
        start = offsets.last_position()
        if start > self.size or (self.size and start == self.size):
            return False
        next_offset, max_ts = self.base_offset, times.max_timestamp()
        pos = start
        try:
            if offsets.keys:
                first = parse_header(os.pread(self.fd, HEADER_SIZE, start))
                if first.base_offset != offsets.base_offset + offsets.keys[-1]:
                    return False
            for pos, header in self._scan_headers(start):
                next_offset = header.next_offset
                max_ts = max(max_ts, header.max_timestamp)
                pos += header.size
        except CorruptRecordError:
            return False
        if pos != self.size:
            return False
        if times.values and times.base_offset + times.values[-1] > next_offset:
            return False
        self.offset_index, self.time_index = offsets, times
        self.next_offset, self.max_timestamp = next_offset, max_ts
        self._bytes_since_index = self.size - start
        return True

    def recover(self) -> int:
        """Rebuild indexes from the log, truncating at the first invalid batch; bytes removed."""
        self.offset_index.truncate_entries(0)
        self.time_index.truncate_entries(0)
        self.offset_index._written = self.time_index._written = -1  # rewrite, never append to stale files
        self.next_offset, self.max_timestamp, self._bytes_since_index = self.base_offset, -1, 0
        valid = 0
        if self.size:
            with mmap.mmap(self.fd, self.size, access=mmap.ACCESS_READ) as mm:
                valid = self._recover_from(memoryview(mm))
        if valid < self.size:
            os.ftruncate(self.fd, valid)
            truncated, self.size = self.size - valid, valid
        else:
            truncated = 0
        self.flush(fsync=True)
        return truncated

    def _recover_from(self, view: memoryview) -> int:
        pos = 0
        try:
            while len(view) - pos >= HEADER_SIZE:
                try:
                    parse_header(view, pos)
                except CorruptRecordError:
                    break
                header = parse_header(view, pos)
                if (pos + header.size > len(view) or header.magic not in _KNOWN_MAGIC
                        or header.base_offset < self.next_offset or header.last_offset_delta < 0
                        or compute_crc(view, pos, header.size) != header.crc):
                    break
                self._index_batch(pos, header.base_offset, header.size)
                self.max_timestamp = max(self.max_timestamp, header.max_timestamp)
                self.next_offset = header.next_offset
                pos += header.size
        finally:
            view.release()
        return pos

    def _index_batch(self, position: int, base_offset: int, size: int) -> None:
        if self._bytes_since_index >= self.index_interval and position > 0:
            self.offset_index.append(base_offset, position)
            self.time_index.maybe_append(self.max_timestamp, base_offset)
            self._bytes_since_index = 0
        self._bytes_since_index += size

    # ---------------------------------------------------------------------------------- writing
    def append(self, parts: list, headers: list[BatchHeader], first_offset: int | None,
               log_append_time: int | None = None) -> None:
        """Write already-validated batches (as ``parts`` buffers) whose offsets start at ``first_offset``
        and run on without gaps, or, with ``first_offset=None``, sit at their headers' base offsets
        (replicated or compacted batches, where offsets may skip)."""
        total = sum(h.size for h in headers)
        _pwrite_all(self.fd, parts, self.size, total)
        position, offset = self.size, first_offset
        for header in headers:
            if first_offset is None:
                offset = header.base_offset
            self._index_batch(position, offset, header.size)
            ts = header.max_timestamp if log_append_time is None else log_append_time
            if position == 0:
                self.first_timestamp = ts
            self.max_timestamp = max(self.max_timestamp, ts)
            offset += header.last_offset_delta + 1
            position += header.size
        self.size, self.next_offset = position, offset

    def seal(self) -> None:
        """Mark the segment inactive: its time index learns the segment's largest timestamp."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.next_offset)

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding an offset >= ``offset`` (batches are never split, so the log
        may end below ``offset``, as in Kafka); bytes removed."""
        found = self.find(offset)
        if found is None:
            return 0
        position = found.position
        removed = self.size - position
        self.truncations += 1
        os.ftruncate(self.fd, position)
        self.size = position
        if position == 0:
            self.first_timestamp = -1
        # The index entries go from the cut batch's base offset on, not from ``offset``: an entry
        # for that batch (keyed by its base) would point at the new end of the file, and the scan
        # below would then find no batch and put the segment's end back at its base offset.
        cut = found.header.base_offset
        self.offset_index.truncate_to(cut)
        self.time_index.truncate_to(cut)
        self.next_offset, self.max_timestamp = self.base_offset, self.time_index.max_timestamp()
        start = self.offset_index.last_position()
        self._bytes_since_index = self.size - start
        for _, header in self._scan_headers(start):
            self.next_offset = header.next_offset
            self.max_timestamp = max(self.max_timestamp, header.max_timestamp)
        return removed

    def flush(self, fsync: bool = True, data: bool = True) -> None:
        """Write index entries still in memory; with ``fsync``, make them durable, and the
        ``.log`` too unless ``data`` is False (the owner knows nothing changed since its last fsync)."""
        if fsync and data:
            os.fsync(self.fd)
        self.offset_index.flush(fsync)
        self.time_index.flush(fsync)

    # ---------------------------------------------------------------------------------- reading
    def _scan_headers(self, position: int, chunk: int = 65536):
        """(position, header) of each batch from ``position`` to the end, reading in chunks."""
        end = self.size
        while position < end:
            buf = os.pread(self.fd, min(chunk, end - position), position)
            advanced = False
            for relative, header in iter_headers(buf):
                advanced = True
                yield position + relative, header
                last_end = relative + header.size
            if not advanced:
                header = parse_header(os.pread(self.fd, HEADER_SIZE, position))
                yield position, header
                position += header.size
            else:
                position += last_end

    def find(self, offset: int) -> BatchPosition | None:
        """The first batch whose last offset is >= ``offset``, or None past the end."""
        _, position = self.offset_index.lookup(offset)
        while position < self.size:
            header = parse_header(os.pread(self.fd, HEADER_SIZE, position))
            if header.last_offset >= offset:
                return BatchPosition(position, header)
            position += header.size
        return None

    def read(self, offset: int, max_bytes: int, max_offset: int, min_one_batch: bool = True) -> memoryview | None:
        """Whole batches from the one holding ``offset``, below ``max_offset``, within ``max_bytes``.

        With ``min_one_batch`` the first batch is returned whole even when larger than ``max_bytes``
        so a consumer can always make progress (KIP-74); without it (a fetch that already holds
        another partition's records, Kafka's ``LogSegment.read`` with ``minOneMessage`` false) a
        first batch that does not fit gives an empty view: there is a batch here, none fits.
        None: no batch at or after ``offset`` below ``max_offset`` in this segment.
        """
        found = self.find(offset)
        if found is None or found.header.base_offset >= max_offset:
            return None
        if not min_one_batch and found.header.size > max_bytes:
            return memoryview(b"")
        start = found.position
        buf = os.pread(self.fd, min(max(max_bytes, found.header.size), self.size - start), start)
        cut = 0
        for relative, header in iter_headers(buf):
            if header.base_offset >= max_offset:
                break
            cut = relative + header.size
        return memoryview(buf)[:cut] if cut else None

    def batches_at_or_after(self, timestamp: int, starting_offset: int):
        """Each batch whose largest timestamp is >= ``timestamp``, from the one holding
        ``starting_offset`` (or the time index's hint, if later) on. As Kafka's
        ``findOffsetByTimestamp(timestamp, startingOffset)``, the caller still skips records below
        ``starting_offset`` inside the first batch yielded."""
        if self.max_timestamp < timestamp:
            return
        found = self.find(max(self.time_index.scan_start(timestamp), starting_offset))
        if found is None:
            return
        for position, header in self._scan_headers(found.position):
            if header.max_timestamp >= timestamp:
                yield BatchPosition(position, header)

    def read_batch(self, found: BatchPosition) -> bytes:
        return os.pread(self.fd, found.header.size, found.position)

    # ------------------------------------------------------------------------------- lifecycle
    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def delete(self) -> None:
        self.close()
        for path in (self.log_path, self.offset_index.path, self.time_index.path):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass


def _pwrite_all(fd: int, parts: list, position: int, total: int) -> None:
    """Write ``parts`` contiguously at ``position`` (IOV_MAX buffers per call, short writes resumed)."""
    written = 0
    for i in range(0, len(parts), _IOV_MAX):
        chunk = parts[i:i + _IOV_MAX]
        expected = sum(len(p) for p in chunk)
        done = os.pwritev(fd, chunk, position + written)
        if done < expected:
            data = b"".join(bytes(p) for p in chunk)
            while done < expected:
                done += os.pwrite(fd, data[done:], position + written + done)
        written += expected
    if written != total:
        raise AssertionError(f"wrote {written} bytes, expected {total}")


_IOV_MAX = os.sysconf("SC_IOV_MAX") if hasattr(os, "sysconf") else 1024
