"""What ``Consumer.subscribe`` was given: topic names and, as librdkafka takes them, regular
expressions (any entry starting with ``^``), resolved against the cluster's topics.

    sub = Subscription(["payments", "^orders-.*"])
    sub.resolve(metadata_response)     # ["orders-eu", "orders-us", "payments"]

Patterns are matched with Python's ``re.search`` (librdkafka uses POSIX regexec: a match anywhere
unless anchored; the leading ``^`` anchors it). Internal topics never match a pattern, as with
Kafka's ``exclude.internal.topics``. The group coordinator is given the resolved names; the
consumer resolves again after every periodic metadata refresh (``metadata.max.age.ms``), so new
matching topics are picked up and deleted ones dropped.
"""
from __future__ import annotations

import re

from broker.errors import InvalidTopicError, KafkaError, KafkaException


class Subscription:
    def __init__(self, topics: list[str]):
        self.names = sorted({t for t in topics if not t.startswith("^")})
        self.patterns = []
        for t in dict.fromkeys(t for t in topics if t.startswith("^")):
            try:
                self.patterns.append(re.compile(t))
            except re.error as e:
                raise InvalidTopicError(f"subscription pattern {t!r} is not a valid regular expression: {e}") from e

    def resolve(self, response) -> list[str]:
        """The topics to consume given a Metadata response listing the cluster's topics."""
        matched = {t.name for t in response.topics
                   if not t.error_code and not t.internal and any(p.search(t.name) for p in self.patterns)}
        return sorted(matched.union(self.names))


def checked_subscription(topics: list[str]) -> Subscription:
    """What ``subscribe()`` takes, checked as librdkafka's ``rd_kafka_subscribe``: an empty list, an
    empty name, a topic named twice or a pattern that does not compile is ``_INVALID_ARG``
    ("Failed to set subscription", confluent-kafka's message), refused before anything changes."""
    if not topics or any(not t for t in topics) or len(set(topics)) != len(topics):
        raise _invalid()
    try:
        return Subscription(topics)
    except InvalidTopicError as e:
        raise _invalid() from e


def _invalid() -> KafkaException:
    return KafkaException(KafkaError(KafkaError._INVALID_ARG,
                                     "Failed to set subscription: Local: Invalid argument or configuration"))
