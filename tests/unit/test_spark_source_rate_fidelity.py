"""The stream reader's rate limits against Spark's Kafka source (``KafkaMicroBatchStream``): the calls
in the order Spark makes them, against a fake view of the brokers and a clock the test moves.
minOffsetsPerTrigger waits for records or maxTriggerDelay (from the last batch that ran; the first
trigger after a start runs), maxOffsetsPerTrigger still cuts a batch the delay let through, and
Trigger.AvailableNow reads to the end fixed at its start in several rate-limited batches; a start
timestamp no record reaches is the option's error, as Spark's, not data loss."""
from __future__ import annotations

import pytest

from broker.errors import InvalidConfigError
from spark_source.offset_lookup import OffsetLookup
from spark_source.options import SourceOptions
from spark_source.reader import StreamReader


class _Lookup:
    """Topic ``t``'s partitions, empty from 0, whose latest offsets a test moves; nothing pinned."""

    def __init__(self, latest: dict):
        self.latest = dict(latest)

    def partitions(self):
        return sorted(self.latest)

    def watermarks(self, tps):
        return {tp: (0, self.latest[tp]) for tp in tps}

    def pinned_start(self, tps):
        return None

    def starting(self, tps):   # startingOffsets=earliest
        return {tp: 0 for tp in tps}

    def commit_group(self, offsets, pin=False):
        pass


class _Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def stream(lookup: _Lookup, **options) -> tuple[StreamReader, _Clock]:
    reader = StreamReader(SourceOptions.parse({"riverlog.bootstrap.servers": "127.0.0.1:1", "subscribe": "t",
                                               "startingOffsets": "earliest", **options}, streaming=True))
    reader._lookup, clock = lookup, _Clock()
    reader.clock = clock
    return reader, clock


def test_min_offsets_waits_for_records_or_max_trigger_delay_since_the_last_batch_that_ran():
    lookup = _Lookup({("t", 0): 3})
    reader, clock = stream(lookup, minOffsetsPerTrigger="10", maxTriggerDelay="5s")
    start = reader.initialOffset()
    limit = reader.getDefaultReadLimit()
    # the first trigger after a start runs with what there is (Spark's lastTriggerMillis starts at 0)
    first = reader.latestOffset(start, limit)
    assert first == {"t": {"0": 3}}
    lookup.latest[("t", 0)] = 8                               # 5 new: fewer than 10
    clock.now += 4.9
    assert reader.latestOffset(first, limit) == first          # delayed
    assert reader.reportLatestOffset() == {"t": {"0": 8}}      # progress still shows what there is
    clock.now += 0.1                                            # 5 s since the batch that ran
    second = reader.latestOffset(first, limit)
    assert second == {"t": {"0": 8}}
    lookup.latest[("t", 0)] = 18                               # 10 new: enough at once
    clock.now += 1
    third = reader.latestOffset(second, limit)
    assert third == {"t": {"0": 18}}
    lookup.latest[("t", 0)] = 19
    clock.now += 4.5                                            # the delay counts from the batch at 18
    assert reader.latestOffset(third, limit) == third


def test_a_batch_the_delay_lets_through_is_still_cut_by_max_offsets():
    lookup = _Lookup({("t", 0): 0, ("t", 1): 0})
    reader, clock = stream(lookup, minOffsetsPerTrigger="50", maxOffsetsPerTrigger="60", maxTriggerDelay="1s")
    start = reader.initialOffset()
    limit = reader.getDefaultReadLimit()
    first = reader.latestOffset(start, limit)
    assert first == start                                       # nothing at all: the batch is empty
    lookup.latest.update({("t", 0): 30, ("t", 1): 10})
    clock.now += 0.5
    assert reader.latestOffset(first, limit) == first           # 40 < 50, delay not over
    lookup.latest.update({("t", 0): 90, ("t", 1): 30})
    assert reader.latestOffset(first, limit) == {"t": {"0": 45, "1": 15}}   # 120 >= 50: 60 by backlog


def test_available_now_reads_to_the_end_fixed_at_its_start_in_rate_limited_batches():
    lookup = _Lookup({("t", 0): 70, ("t", 1): 30})
    reader, _ = stream(lookup, maxOffsetsPerTrigger="40", minOffsetsPerTrigger="40")
    reader.prepareForTriggerAvailableNow()
    offset = reader.initialOffset()
    limit = reader.getDefaultReadLimit()
    ends = []
    while True:
        lookup.latest[("t", 0)] += 5                             # producers go on writing during the run
        end = reader.latestOffset(offset, limit)
        assert reader.reportLatestOffset() == {"t": {"0": 70, "1": 30}}   # the run's end, as Spark reports it
        if end == offset:
            break
        ends.append(end)
        offset = end
    # 40 per batch by backlog, never waiting for minOffsetsPerTrigger, and nothing past the fixed end
    assert ends == [{"t": {"0": 28, "1": 12}}, {"t": {"0": 56, "1": 24}}, {"t": {"0": 70, "1": 30}}]


class _Stamps(OffsetLookup):
    """An OffsetLookup whose broker answers come from dicts: partitions ``t-0`` and ``t-1``."""

    def __init__(self, options: SourceOptions, found: dict):
        self.options, self.found = options, found

    def offsets_for_times(self, stamps):
        return {tp: self.found[tp] for tp in stamps}

    def watermarks(self, tps):
        return {tp: (0, 50) for tp in tps}


@pytest.mark.parametrize("option, value", [("startingTimestamp", "1000"),
                                           ("startingOffsetsByTimestamp", '{"t": {"0": 1000, "1": 1000}}')])
def test_a_start_timestamp_no_record_reaches_is_an_option_error_not_data_loss(option, value):
    # Spark's KafkaOffsetReaderAdmin throws IllegalArgumentException ("No offset matched ..."), which
    # failOnDataLoss=false does not skip: the error names the option, with Riverlog's config code.
    options = SourceOptions.parse({"riverlog.bootstrap.servers": "127.0.0.1:1", "subscribe": "t", option: value,
                                   "failOnDataLoss": "false"}, streaming=True)
    lookup = _Stamps(options, {("t", 0): 7, ("t", 1): None})
    with pytest.raises(InvalidConfigError, match="no record of t-1 has a timestamp at or after 1000") as e:
        lookup.starting([("t", 0), ("t", 1)])
    assert e.value.details.get("config") == option
    latest = SourceOptions.parse({"riverlog.bootstrap.servers": "127.0.0.1:1", "subscribe": "t", option: value,
                                  "startingOffsetsByTimestampStrategy": "latest"}, streaming=True)
    assert _Stamps(latest, lookup.found).starting([("t", 0), ("t", 1)]) == {("t", 0): 7, ("t", 1): 50}
