"""Swapping cleaned segments into a log, crash-safe (Kafka's ``.cleaned`` / ``.swap`` protocol).

Files of one swap, for a new segment at base offset B replacing consecutive old segments:

1. ``B.log.cleaned``, ``B.index.cleaned``, ``B.timeindex.cleaned``: written and fsynced by the
   cleaner while the old segments stay in service;
2. rename ``B.log.cleaned`` to ``B.log.swap`` and fsync the directory: **the commit point**;
3. delete the old segments' files;
4. rename the indexes, then ``B.log.swap`` to ``B.log``; fsync the directory.

Recovery (:func:`finish_interrupted_swaps`, run by ``Log.open`` before it lists segments): every
``*.cleaned`` file is removed (a clean that did not commit: the old segments are intact); every
``B.log.swap`` is finished: the old segments whose base offsets fall in ``[B, end of the swap
segment)`` are deleted, as are any index files of B, the swap file becomes ``B.log`` and its
indexes are rebuilt from it. An old segment of the group whose base lies past the swap segment's
last offset (everything it held was compacted away) may survive a crash in step 3; it holds only
superseded records at offsets above the swap segment's, so the log stays ordered and the next
clean removes it.
"""
from __future__ import annotations

import logging
import mmap
import os

from broker.records.batch import iter_headers
from broker.storage.checkpoint import fsync_dir
from broker.storage.segment import LogSegment, segment_name

log = logging.getLogger(__name__)

CLEANED_SUFFIX, SWAP_SUFFIX = ".cleaned", ".swap"


def commit_swap(new: LogSegment, old: list[LogSegment], directory: str) -> None:
    """Steps 2 to 4 for a complete, fsynced ``new`` segment (still named ``*.cleaned``)."""
    swap_path = new.log_path[:-len(CLEANED_SUFFIX)] + SWAP_SUFFIX
    os.replace(new.log_path, swap_path)
    new.log_path = swap_path
    fsync_dir(directory)
    for segment in old:
        segment.delete()
    rename_cleaned(new, directory)


def rename_cleaned(segment: LogSegment, directory: str) -> None:
    """Give a swapped-in segment's files their final names: indexes first, the log last."""
    for index in (segment.offset_index, segment.time_index):
        final = index.path.rsplit(".", 1)[0] if index.path.endswith((CLEANED_SUFFIX, SWAP_SUFFIX)) else index.path
        if final != index.path:
            os.replace(index.path, final)
            index.path = final
    final = os.path.join(directory, segment_name(segment.base_offset) + ".log")
    os.replace(segment.log_path, final)
    segment.log_path = final
    fsync_dir(directory)


def _swap_range(path: str) -> int | None:
    """The offset after the last batch of a complete swap file."""
    end = None
    if os.path.getsize(path) == 0:
        return end
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        view = memoryview(mm)
        try:
            for _, header in iter_headers(view):
                end = header.next_offset
        finally:
            view.release()
    return end


def finish_interrupted_swaps(directory: str) -> set[int]:
    """Discard unfinished cleans and finish committed swaps (see the module docstring); returns the
    base offsets of segments whose indexes must be rebuilt."""
    names = os.listdir(directory)
    rebuild = set()
    for name in names:
        if name.endswith(CLEANED_SUFFIX) or (name.endswith(SWAP_SUFFIX) and not name.endswith(".log" + SWAP_SUFFIX)):
            os.unlink(os.path.join(directory, name))
    for name in sorted(n for n in names if n.endswith(".log" + SWAP_SUFFIX)):
        base = int(name.split(".", 1)[0])
        path = os.path.join(directory, name)
        end = _swap_range(path)
        end = base + 1 if end is None else max(end, base + 1)
        for other in os.listdir(directory):
            stem, _, ext = other.partition(".")
            if stem.isdigit() and base <= int(stem) < end and ext in ("log", "index", "timeindex"):
                os.unlink(os.path.join(directory, other))
        os.replace(path, os.path.join(directory, segment_name(base) + ".log"))
        log.warning("finished an interrupted segment swap at offset %d in %s", base, directory)
        rebuild.add(base)
    if rebuild:
        fsync_dir(directory)
    return rebuild
