"""Kafka Connect's predicates as Spark conditions: ``condition(frame)`` is true for the rows the
gated transform applies to (see :func:`connect.transforms.chain`)."""
from __future__ import annotations

from pyspark.sql import functions as F

from connect.errors import ConfigError
from connect.transform_base import REQUIRED, Setting, non_empty_string, parse_config, valid_regex

P = "org.apache.kafka.connect.transforms.predicates."


class Predicate:
    class_name = ""
    SETTINGS: list[Setting] = []

    def __init__(self, config: dict | None = None):
        self.config = dict(config or {})
        self.values = parse_config(self.class_name, self.SETTINGS, self.config)

    def condition(self, frame):
        raise NotImplementedError


class TopicNameMatches(Predicate):
    """True when the whole topic name matches ``pattern`` (Java's ``Matcher.matches``)."""
    class_name = P + "TopicNameMatches"
    SETTINGS = [Setting("pattern", default=REQUIRED, validator=lambda v: non_empty_string(v) or valid_regex(v))]

    def condition(self, frame):
        return F.col("topic").rlike("^(?:" + self.values["pattern"] + ")\\z")


class HasHeaderKey(Predicate):
    """True when at least one header has key ``name``."""
    class_name = P + "HasHeaderKey"
    SETTINGS = [Setting("name", default=REQUIRED, validator=non_empty_string)]

    def condition(self, frame):
        return F.exists(F.coalesce(F.col("headers"), F.array()), lambda h: h["key"] == self.values["name"])


class RecordIsTombstone(Predicate):
    """True when the value is null."""
    class_name = P + "RecordIsTombstone"

    def condition(self, frame):
        return F.col("value").isNull()


PREDICATES = {c.class_name: c for c in (TopicNameMatches, HasHeaderKey, RecordIsTombstone)}


def predicate(class_name: str, config: dict | None = None) -> Predicate:
    """A predicate by Kafka's class name."""
    try:
        cls = PREDICATES[class_name]
    except KeyError:
        raise ConfigError(f"unknown predicate class {class_name!r}",
                          errors={"type": [f"Class {class_name} could not be found."]}) from None
    return cls(config)
