"""``riverlog transactions find-hanging`` against Kafka's TransactionsCommandTest find-hanging
cases: which open transactions are candidates, and which of them hang."""
from __future__ import annotations

import pytest

from broker.cli.hanging_transactions import HEADERS, candidates, hanging_rows, open_at
from broker.client import TopicPartition
from broker.client.txn_admin import ActiveProducer, PartitionProducers, TransactionDescription

pytestmark = pytest.mark.unit

NOW = 100 * 60_000
TIMEOUT = 15 * 60_000
OLD = NOW - TIMEOUT - 1


def producers(*active) -> PartitionProducers:
    return PartitionProducers(0, 10, [], list(active))


def describe(txn_id: str, *partitions) -> TransactionDescription:
    return TransactionDescription(txn_id, "Ongoing", 0, 0, 60_000, OLD, [TopicPartition(*tp) for tp in partitions])


def test_candidates_are_open_transactions_idle_past_the_timeout():
    found = candidates({("t", 0): producers(ActiveProducer(1, 0, 5, OLD, 3), ActiveProducer(2, 0, 5, OLD, -1),
                                            ActiveProducer(3, 0, 5, NOW - TIMEOUT, 4))}, NOW, TIMEOUT)
    assert [(t, p, a.producer_id) for t, p, a in found] == [("t", 0, 1)]


def test_hanging_when_no_coordinator_knows_it_or_its_transaction_lacks_the_partition():
    found = candidates({("t", 0): producers(ActiveProducer(1, 2, 5, OLD, 3), ActiveProducer(2, 0, 5, OLD, 7),
                                            ActiveProducer(3, 0, 5, OLD, 9), ActiveProducer(4, 0, 5, OLD, 11))},
                       NOW, TIMEOUT)
    ids = {2: "known-with-partition", 3: "known-elsewhere", 4: "not-found"}
    descriptions = {"known-with-partition": describe("known-with-partition", ("t", 0)),
                    "known-elsewhere": describe("known-elsewhere", ("t", 1)), "not-found": None}
    rows = hanging_rows(found, ids, descriptions, NOW)
    assert rows == [["t", "0", "1", "2", "-1", "3", str(OLD), "15"],
                    ["t", "0", "3", "0", "-1", "9", str(OLD), "15"],
                    ["t", "0", "4", "0", "-1", "11", str(OLD), "15"]]
    assert HEADERS == ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
                       "LastTimestamp", "Duration(min)"]


def test_abort_by_start_offset_names_the_producer_whose_open_transaction_starts_there():
    """kafka-transactions abort --start-offset: only an open transaction (a start offset) matches."""
    described = producers(ActiveProducer(1, 0, 5, OLD, -1), ActiveProducer(2, 3, 5, OLD, 7), ActiveProducer(3, 0, 5, OLD, 9))
    assert (open_at(described, 7).producer_id, open_at(described, 7).producer_epoch) == (2, 3)
    assert open_at(described, 9).producer_id == 3
    assert open_at(described, 8) is None
    assert open_at(described, -1) is None      # a producer without an open transaction is never named
