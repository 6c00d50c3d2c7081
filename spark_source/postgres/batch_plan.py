"""What a batch read (``spark.read.format("postgres-cdc")``) reads, decided before any row is read.

Pure: the batch-only options, the spread of the snapshot's tables over Spark tasks, and the
filter that turns the pgoutput messages peeked from a slot into the committed transactions
between two offsets. The shell (:mod:`spark_source.postgres.batch`) owns the connections.

A batch read has two kinds, chosen by ``snapshot.mode``:

* ``initial`` (and ``initial_only``, ``when_needed``; the default): a snapshot of the included
  tables as Debezium's ``op: r`` records, read in a ``REPEATABLE READ`` read-only transaction;
* ``no_data``: the changes pending in the existing slot ``slot.name`` — committed after
  ``startingOffsets`` (the slot's ``confirmed_flush_lsn`` when ``earliest``) and at or before
  ``endingOffsets`` (the WAL position when the read is planned when ``latest``) — peeked, so the
  slot neither moves nor is created.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterable, Iterator

from broker.errors import InvalidConfigError
from spark_source.postgres.pgoutput import PgOutputDecoder, lsn_from_str
from spark_source.postgres.transactions import Transaction, TransactionAssembler

# Options only a batch read takes; the rest are the stream's (CdcOptions).
BATCH_OPTIONS = ("startingoffsets", "endingoffsets", "snapshot.max.threads")


def _bad(option: str, why: str) -> InvalidConfigError:
    return InvalidConfigError(f"option '{option}': {why}", config=option)


def parse_lsn(option: str, value, keyword: str) -> int | None:
    """``keyword`` (None), an LSN as PostgreSQL prints it (``0/16B3748``), its decimal value (the
    rows' ``offset`` column), or Debezium's source offset JSON ``{"lsn": ...}``."""
    text = str(value).strip() if value is not None else keyword
    if text.lower() in ("", keyword):
        return None
    if text.startswith("{"):
        try:
            text = str(json.loads(text)["lsn"]).strip()
        except (ValueError, KeyError, TypeError):
            raise _bad(option, f"a JSON offset must be an object with \"lsn\", got {value!r}") from None
    try:
        if text.isdigit():
            return int(text)
        high, slash, low = text.partition("/")
        if not slash:
            raise ValueError(text)
        return lsn_from_str(text)
    except ValueError:
        raise _bad(option, f"must be {keyword}, an LSN such as 0/16B3748, its decimal value or "
                           f"{{\"lsn\": ...}}, got {value!r}") from None


@dataclass(frozen=True)
class BatchOptions:
    """The batch-only options, typed (``split`` takes them out of the source's options)."""
    starting_lsn: int | None = None     # None: earliest, the slot's confirmed position
    ending_lsn: int | None = None       # None: latest, the WAL position when the read is planned
    max_threads: int = 1

    @classmethod
    def split(cls, options) -> tuple["BatchOptions", dict]:
        """(the batch options, every other option) from a data source's options."""
        options = dict(options or {})
        mine = {str(k).lower(): v for k, v in options.items() if str(k).lower() in BATCH_OPTIONS}
        rest = {k: v for k, v in options.items() if str(k).lower() not in BATCH_OPTIONS}
        threads = str(mine.get("snapshot.max.threads", "1")).strip()
        if not threads.isdigit() or int(threads) < 1:
            raise _bad("snapshot.max.threads", f"must be an integer of at least 1, got {threads!r}")
        start = parse_lsn("startingOffsets", mine.get("startingoffsets"), "earliest")
        end = parse_lsn("endingOffsets", mine.get("endingoffsets"), "latest")
        if start is not None and end is not None and end < start:
            raise _bad("endingOffsets", f"{end} is before startingOffsets {start}")
        return cls(start, end, int(threads)), rest

    @property
    def given(self) -> list[str]:
        """The batch-only options set (a streaming query refuses them)."""
        return [name for name, v in (("startingOffsets", self.starting_lsn), ("endingOffsets", self.ending_lsn),
                                     ("snapshot.max.threads", None if self.max_threads == 1 else 1)) if v is not None]


def spread_tables(sizes: list[tuple[str, int]], max_threads: int) -> list[tuple[str, ...]]:
    """The tables (name, estimated rows) spread over at most ``max_threads`` groups of about equal
    rows: largest first onto the lightest group (LPT), each group in name order; one table is never
    split, so each group is one consistent snapshot of its tables."""
    groups: list[list] = [[0, []] for _ in range(max(1, min(max_threads, len(sizes))))]
    for name, rows in sorted(sizes, key=lambda s: (-max(s[1], 0), s[0])):
        lightest = min(groups, key=lambda g: (g[0], len(g[1])))
        lightest[0] += max(rows, 0)
        lightest[1].append(name)
    return sorted((tuple(sorted(g[1])) for g in groups if g[1]), key=lambda g: g[0])


def pending_transactions(messages: Iterable[tuple[int, bytes]], after: int, until: int) -> Iterator[Transaction]:
    """Committed transactions with ``after < end_lsn <= until`` (heartbeat positions included) from
    (LSN, pgoutput payload) pairs in WAL order, as ``pg_logical_slot_peek_binary_changes`` gives them."""
    decoder, assembler = PgOutputDecoder(), TransactionAssembler(compact=True)
    for lsn, payload in messages:
        payload = bytes(payload)
        for txn in assembler.feed(decoder.decode(payload), lsn, payload):
            if after < txn.end_lsn <= until:
                yield txn
