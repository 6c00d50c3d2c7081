"""SuppressionIntegrationTest's changelog scenarios: the suppression buffer's changelog takes
``BufferConfig.withLoggingEnabled``'s topic configs, and ``withLoggingDisabled`` is refused as
``Materialized``'s is (Riverlog's stores are always logged). Topology and configs only."""
from __future__ import annotations

import pytest

from streams.builder import StreamsBuilder

pytestmark = pytest.mark.unit


# ---------------------------------------------------------------- SuppressionIntegrationTest
def _suppressed_aggregate(buffer):
    """SuppressionIntegrationTest's topology: an aggregate of the input, suppressed into one topic
    and written raw to another, on the default serdes."""
    from streams.suppress import Suppressed
    b = StreamsBuilder()
    counts = b.stream("input").groupByKey().aggregate(lambda: "()", lambda k, v, agg: f"{agg},({k}: {v})")
    counts.suppress(Suppressed.untilTimeLimit(2 ** 63 - 1, buffer)).toStream().to("output-suppressed")
    counts.toStream().to("output-raw")
    return b.build()


def _store(topology, name):
    return next(s for sub in topology.subtopologies for s in sub.stores if s.name == name)


def test_the_suppression_buffer_changelog_takes_the_buffers_logging_config():
    """shouldAllowOverridingChangelogConfig / shouldCreateChangelogByDefault: the buffer's store is
    ``KTABLE-SUPPRESS-STATE-STORE-0000000004`` and ``BufferConfig.withLoggingEnabled(config)``
    gives its changelog's configs, as ``Materialized.withLoggingEnabled`` does a store's."""
    from streams.internal_topics import changelog_config
    from streams.suppress import BufferConfig
    default = _store(_suppressed_aggregate(BufferConfig.maxRecords(1).emitEarlyWhenFull()),
                     "KTABLE-SUPPRESS-STATE-STORE-0000000004")
    assert changelog_config(default, {}, 0)["cleanup.policy"] == "compact"
    assert "retention.ms" not in changelog_config(default, {}, 0)
    buffer = BufferConfig.maxRecords(1).emitEarlyWhenFull().withLoggingEnabled({"retention.ms": "1000"})
    assert buffer.withMaxBytes(10).withNoBound().logConfig == (("retention.ms", "1000"),), "kept by the bounds"
    logged = _store(_suppressed_aggregate(buffer), "KTABLE-SUPPRESS-STATE-STORE-0000000004")
    assert changelog_config(logged, {}, 0) == {**changelog_config(default, {}, 0), "retention.ms": "1000"}


def test_a_suppression_buffer_without_a_changelog_is_refused_as_a_store_without_one():
    """shouldAllowDisablingChangelog: Riverlog's stores are always logged (the changelog is what a
    restart from the broker reads), so ``withLoggingDisabled`` is refused as ``Materialized``'s is,
    and a config that would let the broker delete the buffer's state too."""
    from streams.errors import TopologyError
    from streams.suppress import BufferConfig
    with pytest.raises(TopologyError, match="always logged"):
        BufferConfig.maxRecords(1).withLoggingDisabled()
    with pytest.raises(TopologyError, match="cleanup.policy"):
        BufferConfig.unbounded().withLoggingEnabled({"cleanup.policy": "delete"})
