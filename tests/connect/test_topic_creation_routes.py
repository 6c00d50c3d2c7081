"""The names a source connector's topics are created under (KIP-158): its records' topics after
the transforms, as Kafka's ``AbstractWorkerSourceTask`` creates the topic of each record the
transformation chain returns (``maybeCreateTopic(record.topic())`` after ``transformationChain.apply``).
A ``RegexRouter`` renames (``matches()`` then ``replaceFirst`` with Java's ``$n`` / ``${name}``
syntax), a ``Filter`` keyed by ``TopicNameMatches`` drops; a route only the records can say leaves
the topics to the broker's auto-creation."""
from __future__ import annotations

import pytest

import connect.plugins  # noqa: F401  (registers the built-in plugins)
from connect.config import parse_connector_config
from connect.topic_creation import topics_known_at_start

_SOURCE = {"name": "lines", "connector.class": "FileStreamSource", "file": "/tmp/in.txt", "topic": "lines",
           "topic.creation.default.replication.factor": "1", "topic.creation.default.partitions": "3"}


def _known(declared, **transforms):
    config = parse_connector_config({**_SOURCE, **transforms})
    return topics_known_at_start(declared, config.transforms, config.predicates)


def _router(alias, regex, replacement, **extra):
    return {f"transforms.{alias}.type": "RegexRouter", f"transforms.{alias}.regex": regex,
            f"transforms.{alias}.replacement": replacement, **{f"transforms.{alias}.{k}": v for k, v in extra.items()}}


@pytest.mark.unit
def test_a_regex_router_renames_the_topics_created():
    tables = ["shop.public.customers", "shop.public.orders", "shop.inventory.items"]
    # Debezium's docs: route every table topic of one schema elsewhere
    assert _known(tables, transforms="route", **_router("route", "(.*)\\.public\\.(.*)", "$1.$2")) == [
        "shop.customers", "shop.orders", "shop.inventory.items"]
    # whole-name match only; two routers apply in order; names coming out the same are one topic
    assert _known(["a.b", "xa.b"], transforms="r1,r2", **_router("r1", "a\\.(b)", "$1"),
                  **_router("r2", "(?:xa\\.)?b", "all")) == ["all"]
    # Java's replacement: digits taken while they name a group, ${name}, \\$ a literal, $0 the match,
    # a group that took no part adds nothing
    assert _known(["ab"], transforms="r", **_router("r", "(a)(b)", "$12-$0-\\$")) == ["a2-ab-$"]
    assert _known(["ab"], transforms="r", **_router("r", "(a)(x)?b", "[$2]$1")) == ["[]a"]
    # replaceFirst: the first match from the start, the rest of the topic kept (a|ab on ab: Xb)
    assert _known(["ab"], transforms="r", **_router("r", "a|ab", "X")) == ["Xb"]


@pytest.mark.unit
def test_a_topic_name_predicate_decides_per_topic_and_a_filter_drops_its_topics():
    names = {"predicates": "isOrders", "predicates.isOrders.type": "TopicNameMatches",
             "predicates.isOrders.pattern": ".*orders"}
    assert _known(["shop.orders", "shop.items"], transforms="r", **names,
                  **_router("r", "shop\\.(.*)", "eu.$1", predicate="isOrders")) == ["eu.orders", "shop.items"]
    assert _known(["shop.orders", "shop.items"], transforms="r", **names,
                  **_router("r", "shop\\.(.*)", "eu.$1", predicate="isOrders", negate="true")) == [
        "shop.orders", "eu.items"]
    assert _known(["shop.orders", "shop.items"], transforms="drop", **names, **{
        "transforms.drop.type": "Filter", "transforms.drop.predicate": "isOrders"}) == ["shop.items"]
    # a filter whose predicate looks at the record may let some through: the topic is written
    assert _known(["shop.orders"], transforms="drop", **{
        "predicates": "tomb", "predicates.tomb.type": "RecordIsTombstone",
        "transforms.drop.type": "Filter", "transforms.drop.predicate": "tomb"}) == ["shop.orders"]


@pytest.mark.unit
def test_a_route_only_the_records_can_say_leaves_the_topics_to_the_broker():
    # guard (already matched): these routes were left to auto-creation before
    assert _known(["lines"], transforms="t", **{"transforms.t.type": "TimestampRouter"}) == []
    assert _known(["lines"], transforms="r", **{"predicates": "h", "predicates.h.type": "HasHeaderKey",
                                                "predicates.h.name": "x"},
                  **_router("r", "(.*)", "x-$1", predicate="h")) == []
    # a Java-only pattern (named groups as Java spells them) is not guessed at
    assert _known(["lines"], transforms="r", **_router("r", "(?<all>.*)", "x-${all}")) == []
