"""Where a consumer starts reading a partition: the logical start offsets and ``auto.offset.reset``.

Start offsets are Kafka's and librdkafka's: an offset, ``OFFSET_BEGINNING``/``OFFSET_END``,
``OFFSET_STORED``/``OFFSET_INVALID`` (the group's committed offset, which the fetcher asks the
coordinator for, else ``auto.offset.reset``) or ``OFFSET_TAIL(n)`` (``-2000 - n``: ``n`` records
before the log end, never before the log start; :func:`tail_start`). A logical offset is resolved
by ListOffsets, whose timestamps ``EARLIEST`` and ``LATEST`` name the log start and the log end.
Kept apart from the fetch state because the fetcher, the assignment and offset lookups share it.
"""
from __future__ import annotations

from broker.client.message import OFFSET_BEGINNING, OFFSET_END

EARLIEST, LATEST = -2, -1  # ListOffsets' timestamps for the log start and the log end
OFFSET_TAIL_BASE = -2000  # librdkafka's RD_KAFKA_OFFSET_TAIL(n) is OFFSET_TAIL_BASE - n
# auto.offset.reset's values (Kafka's and librdkafka's spellings) -> where to start; None: report
AUTO_OFFSET_RESET = {"earliest": EARLIEST, "smallest": EARLIEST, "beginning": EARLIEST,
                     "latest": LATEST, "largest": LATEST, "end": LATEST, "error": None, "none": None}


def list_offsets_timestamp(offset: int) -> int:
    """The ListOffsets timestamp that resolves a start offset other than the stored one: ``LATEST``
    for ``OFFSET_TAIL(n)`` (then :func:`tail_start`), ``EARLIEST``/``LATEST`` for
    ``OFFSET_BEGINNING``/``OFFSET_END``, else the offset itself."""
    if offset <= OFFSET_TAIL_BASE:
        return LATEST
    return {OFFSET_BEGINNING: EARLIEST, OFFSET_END: LATEST}.get(offset, offset)


def tail_start(offset: int, log_start_offset: int, log_end_offset: int) -> int:
    """Where ``OFFSET_TAIL(n)`` (``offset == -2000 - n``) starts: ``n`` records before the log end,
    never before the log start (librdkafka's ``rd_kafka_toppar_handle_Offset`` floors it at 0)."""
    return max(log_start_offset, log_end_offset - (OFFSET_TAIL_BASE - offset))
