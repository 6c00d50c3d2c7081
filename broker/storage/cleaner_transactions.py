"""What the log cleaner knows of transactions (Kafka's ``CleanedTransactionMetadata``).

The cleaner walks the cleanable range in offset order. Every transaction with records there has
ended (the range stops at the last stable offset), and whether it aborted comes from the
partition's aborted ranges (``ProducerStateManager.aborted``). From that, :class:`Transactions`
answers the cleaner's three questions: is this data batch aborted (then it neither enters the key
map nor survives), did its transaction keep any record, and may this marker go. Pure: no I/O.
"""
from __future__ import annotations

from bisect import bisect_right

from broker.records.batch import BatchHeader


class Transactions:
    """What the cleaner knows of transactions, fed the cleanable range's batches in offset order.

    ``aborted``: the partition's aborted transactions, each with ``producer_id``, ``first_offset``
    and ``last_offset`` (its abort marker). A transactional batch is aborted when it lies in one
    of its producer's ranges; one producer's transactions never overlap in a partition.
    """

    def __init__(self, aborted=()):
        ranges: dict[int, list[tuple[int, int]]] = {}
        for a in aborted:
            ranges.setdefault(a.producer_id, []).append((a.first_offset, a.last_offset))
        self._ranges = {pid: sorted(r) for pid, r in ranges.items()}
        self._firsts = {pid: [first for first, _ in r] for pid, r in self._ranges.items()}
        self._listed_markers = {(a.producer_id, a.last_offset) for a in aborted}
        self._kept_data: set[int] = set()  # producers whose current transaction kept a record

    def is_aborted(self, header: BatchHeader) -> bool:
        """A data batch of an aborted transaction."""
        if header.is_control or not header.is_transactional:
            return False
        firsts = self._firsts.get(header.producer_id)
        if not firsts:
            return False
        i = bisect_right(firsts, header.base_offset) - 1
        return i >= 0 and header.base_offset < self._ranges[header.producer_id][i][1]

    def kept_records(self, header: BatchHeader) -> None:
        """Some records of this data batch survive the clean."""
        if header.is_transactional:
            self._kept_data.add(header.producer_id)

    def marker_removable(self, header: BatchHeader) -> bool | None:
        """For a control batch: True when nothing of its transaction is left, so it may go once it
        is old enough; None when it waits only for the owner to forget its aborted range; False
        while records of its transaction remain."""
        pid = header.producer_id
        if pid < 0:
            return False
        if pid in self._kept_data:
            self._kept_data.discard(pid)
            return False
        if (pid, header.base_offset) in self._listed_markers:
            return None
        return True


def aborted_after_clean(aborted: list, end_offset: int) -> list:
    """The aborted transactions to keep listing after a clean up to ``end_offset`` was swapped in:
    those whose marker lies at or past it (the records of the others were removed)."""
    return [a for a in aborted if a.last_offset >= end_offset]
