"""The periodic metadata refresher and regex subscriptions, with a fake cluster and a scripted wait."""
from __future__ import annotations

import pytest

from broker.client.metadata_refresh import MetadataRefresher
from broker.client.subscription import Subscription
from broker.errors import InvalidTopicError, NetworkError
from broker.proto import riverlog_pb2 as pb

pytestmark = pytest.mark.unit


def metadata(*names, internal=(), failed=()):
    return pb.MetadataResponse(topics=[
        pb.TopicMetadata(name=n, internal=n in internal, error_code=3 if n in failed else 0) for n in names])


class FakeCluster:
    def __init__(self, answers):
        self.answers = list(answers)
        self.asked = []

    def refresh(self, topics):
        self.asked.append(topics)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_refreshes_every_interval_asking_for_all_topics_and_tells_listeners():
    cluster = FakeCluster([metadata("a"), NetworkError("down"), metadata("a", "b")])
    waits, seen = [], []

    def wait(seconds):  # three rounds, then stopped
        waits.append(seconds)
        return len(waits) > 3

    refresher = MetadataRefresher(cluster, 250, wait=wait, start=False)
    refresher.listeners.append(lambda r: seen.append([t.name for t in r.topics]))
    refresher._run()  # the thread's loop, on this thread
    assert waits == [0.25] * 4 and cluster.asked == [None] * 3  # None: every topic, never auto-creating
    assert seen == [["a"], ["a", "b"]]  # a failed refresh tells nobody


def test_zero_turns_it_off():
    refresher = MetadataRefresher(FakeCluster([]), 0)
    assert refresher._thread is None


def test_a_failing_listener_does_not_stop_the_others():
    refresher = MetadataRefresher(FakeCluster([metadata("a")]), 0)
    seen = []
    refresher.listeners += [lambda r: 1 / 0, lambda r: seen.append(len(r.topics))]
    refresher.refresh_now()
    assert seen == [1]


def test_subscription_resolves_patterns_and_names():
    sub = Subscription(["payments", "^orders-.*", "^orders-.*"])
    response = metadata("orders-eu", "orders-us", "xorders-1", "__orders-internal", "orders-gone", "payments",
                        internal={"__orders-internal"}, failed={"orders-gone"})
    assert sub.resolve(response) == ["orders-eu", "orders-us", "payments"]
    assert Subscription(["^.*-dlq$"]).resolve(metadata("a-dlq", "a-dlq-old")) == ["a-dlq"]
    assert Subscription(["plain"]).patterns == []


def test_an_invalid_pattern_is_refused():
    with pytest.raises(InvalidTopicError, match="not a valid regular expression"):
        Subscription(["^orders-("])
