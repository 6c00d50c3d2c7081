"""A periodic metadata refresh (its thread resolving the regex subscription) racing ``subscribe()``
on the application's thread must not put the old subscription's topics back: the refresher read the
old subscription, the application subscribed anew, then the refresher's answer arrived. Without the
new subscription having a pattern, nothing would ever correct it. The interleaving is forced with
events; the group side is the in-process coordinator of test_client_membership."""
from __future__ import annotations

import threading

import pytest

from broker.client.metadata_refresh import MetadataRefresher
from broker.proto import riverlog_pb2 as pb
from tests.unit.test_client_membership import app, coordinator  # noqa: F401 (fixtures)

pytestmark = pytest.mark.unit


class Topics:
    """The cluster as a regex subscription sees it: its topics' names, and a refresher not running."""

    def __init__(self, names):
        self.names = names
        self.refresher = MetadataRefresher(self, 0, start=False)

    def refresh(self, topics=None):
        return pb.MetadataResponse(topics=[pb.TopicMetadata(name=n) for n in self.names])


def test_a_refresh_resolving_the_old_subscription_does_not_undo_subscribe(app):  # noqa: F811
    a = app()
    a.cluster = Topics(["orders-eu", "t"])
    a.subscribe(["^orders-.*"])
    membership, old = a._membership, a._subscription
    assert membership.topics == ["orders-eu"]
    a.cluster.names.append("orders-us")
    resolving, resume = threading.Event(), threading.Event()
    resolve = old.resolve

    def paused(response):  # the refresher thread, stopped once it has read the old subscription
        resolving.set()
        assert resume.wait(10)
        return resolve(response)

    old.resolve = paused
    refresher = threading.Thread(target=a._on_metadata, args=(a.cluster.refresh(),))
    refresher.start()
    assert resolving.wait(10)
    a.subscribe(["t"])  # the application's thread, while the refresher is between read and write
    resume.set()
    refresher.join(10)
    assert not refresher.is_alive()
    assert membership.topics == ["t"]
