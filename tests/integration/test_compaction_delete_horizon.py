"""The delete horizon in a real broker: a tombstone with an old timestamp outlives the first clean."""
from __future__ import annotations

import time

import pytest

from tests.conftest import wait_until
from tests.integration.test_retention_compaction import (QUICK, active_base, cleaned_up_to_the_active_segment,
                                                         consume_from, create_topic, produce, watermarks)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

DAY = 86_400_000


def test_a_lagging_consumer_sees_a_tombstone_stamped_with_an_old_source_time(broker_factory, topic_name):
    """A CDC tombstone carries its source time, two days old, on a topic that keeps deletes for a
    day: the cleaner keeps it for a day from its first clean, so a consumer resuming at it sees it."""
    broker = broker_factory(QUICK)
    create_topic(broker.bootstrap, topic_name, cleanup_policy="compact", segment_bytes=100,
                 min_cleanable_dirty_ratio=0.01, delete_retention_ms=DAY)
    now = int(time.time() * 1000)
    produce(broker.bootstrap, topic_name, [(b"k1", b"v1", 0)])                  # offset 0
    produce(broker.bootstrap, topic_name, [(b"k1", None, now - 2 * DAY)])       # offset 1
    produce(broker.bootstrap, topic_name, [(b"other-%d" % i, b"x", 0) for i in range(3)])
    wait_until(lambda: cleaned_up_to_the_active_segment(broker.data_dir, topic_name)
               and active_base(broker.data_dir, topic_name) > 1, 60, 0.1,
               "the cleaner to compact past the tombstone")

    _, hw = watermarks(broker.bootstrap, topic_name)
    read = consume_from(broker.bootstrap, topic_name, 1, hw)
    assert (read[0].offset(), read[0].key(), read[0].value()) == (1, b"k1", None), "the tombstone is gone"
    assert read[0].timestamp()[1] == now - 2 * DAY
