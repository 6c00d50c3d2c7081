"""Option checks of Spark's Kafka source (KafkaSourceProvider's validate*Options, as its
KafkaSourceProviderSuite and KafkaRelationSuite exercise them) that the riverlog source matches."""
from __future__ import annotations

import logging

import pytest

from spark_source.options import SourceOptions

BASE = {"riverlog.bootstrap.servers": "127.0.0.1:1", "subscribe": "t"}


@pytest.mark.parametrize("name, value", [("maxOffsetsPerTrigger", "5"), ("minOffsetsPerTrigger", "5"),
                                         ("maxTriggerDelay", "5s")])
def test_a_batch_read_warns_that_it_ignores_trigger_options(caplog, name, value):
    """Spark's ``validateBatchOptions`` accepts the micro-batch options in a batch read and warns
    that it ignores them; a stream takes them without a word."""
    with caplog.at_level(logging.WARNING, logger="spark_source.options"):
        SourceOptions.parse({**BASE, name: value}, streaming=True)
        assert f"{name} option ignored" not in caplog.text
        SourceOptions.parse({**BASE, name: value}, streaming=False)
    assert f"{name} option ignored in batch queries" in caplog.text


def test_a_latest_offset_below_the_querys_position_is_asked_again_before_it_counts(caplog):
    """Spark's ``fetchLatestOffsets(knownOffsets)`` (KAFKA-7703): a latest offset below the one the
    query has is asked again, ``fetchOffset.numRetries`` times in all, ``fetchOffset.retryIntervalMs``
    apart; only one that stays lower goes on to the data-loss check."""
    from spark_source.offset_lookup import settled_latest
    tp, other = ("t", 0), ("t", 1)
    answers = iter([{tp: 4, other: 9}, {tp: 4, other: 9}, {tp: 12, other: 9}])
    waits: list[float] = []
    with caplog.at_level(logging.WARNING, logger="spark_source.reader"):
        assert settled_latest(lambda: next(answers), {tp: 10, other: 3}, 3, 25, waits.append) == {tp: 12, other: 9}
    assert waits == [0.025, 0.025] and "(('t', 0), 10, 4)" in caplog.text
    answers = iter([{tp: 4}, {tp: 5}, {tp: 6}])     # stays lower: the last answer, for the data-loss check
    assert settled_latest(lambda: next(answers), {tp: 10}, 2, 0, waits.append) == {tp: 5}
    answers = iter([{tp: 4, other: 1}])             # a new partition, or nothing known: asked once
    assert settled_latest(lambda: next(answers), {other: 0}, 3, 0, waits.append) == {tp: 4, other: 1}
    answers = iter([{tp: 4}])
    assert settled_latest(lambda: next(answers), None, 3, 0, waits.append) == {tp: 4}
    assert len(waits) == 3
