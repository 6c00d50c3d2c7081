"""Batch 0's start survives a crash: Spark keeps only each batch's end in its offset log and asks
the source for batch 0's start again when it replays batch 0, so ``startingOffsets=latest`` must
answer what it answered the first time (pinned in the query's group), or the records that arrived
in between would be skipped. Driven through the stream reader's own calls, against a real broker."""
from __future__ import annotations

import pytest

from broker.client import AdminClient, NewTopic, Producer
from spark_source.options import SourceOptions
from spark_source.reader import StreamReader

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def produce(servers: str, topic: str, n: int) -> None:
    with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
        for i in range(n):
            p.produce(topic, value=str(i).encode(), partition=0)
        assert p.flush(30) == 0


def reader(servers: str, topic: str) -> StreamReader:
    return StreamReader(SourceOptions.parse({"riverlog.bootstrap.servers": servers, "subscribe": topic,
                                             "startingoffsets": "latest", "groupid": f"{topic}-q"},
                                            streaming=True))


def test_latest_is_resolved_once_and_answered_again_until_batch_zero_is_done(shared_broker, topic_name):
    servers = shared_broker.bootstrap
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.create_topics([NewTopic(topic_name, 1)])[topic_name].result(30)
    produce(servers, topic_name, 3)
    first = reader(servers, topic_name)
    start = first.initialOffset()
    assert start == {topic_name: {"0": 3}}
    produce(servers, topic_name, 4)                       # batch 0 will read these ...
    end = first.latestOffset(start, first.getDefaultReadLimit())
    assert end == {topic_name: {"0": 7}}
    first.stop()                                          # ... but the driver dies before it commits
    produce(servers, topic_name, 2)
    again = reader(servers, topic_name)                   # the restarted query replays batch 0
    assert again.initialOffset() == start                 # from the same start: nothing skipped
    assert again.latestOffset(end, again.getDefaultReadLimit()) == {topic_name: {"0": 9}}  # batch 0 done
    again.stop()
    fresh = reader(servers, topic_name)                   # a query from a new checkpoint starts afresh
    assert fresh.initialOffset() == {topic_name: {"0": 9}}
    fresh.stop()
