"""Topics a source connector creates (KIP-158): Kafka's ``topic.creation.*`` connector settings,
under the worker's ``topic.creation.enable`` (default true).

A source connector that sets any ``topic.creation.`` key creates each topic it writes that does not
exist yet with the settings of the first group in ``topic.creation.groups`` whose ``include``
patterns match the topic's whole name and whose ``exclude`` patterns do not, else of the
``default`` group (which matches every topic)::

    topic.creation.default.replication.factor=3      required (-1: the broker's default)
    topic.creation.default.partitions=6              required (-1: the broker's default)
    topic.creation.default.cleanup.policy=compact    any other key is a topic config
    topic.creation.groups=audit
    topic.creation.audit.include=audit\\..*         regular expressions, comma separated
    topic.creation.audit.partitions=1                a group's replication factor and partitions
                                                     default to the default group's

Kafka's ``SourceConnectorConfig`` / ``TopicCreationConfig`` / ``TopicCreationGroup``: the same key
names, validators and messages. Pure but for :func:`create_topics`.
"""
from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from connect.config_def import NO_DEFAULT, ConfigDef, ConfigKey, Importance, Invalid, Type, Width
from connect.config_validators import unique_aliases

log = logging.getLogger(__name__)

PREFIX = "topic.creation."
GROUPS = PREFIX + "groups"
DEFAULT_GROUP = "default"
GROUP = "Topic Creation"
INCLUDE, EXCLUDE, REPLICATION_FACTOR, PARTITIONS = "include", "exclude", "replication.factor", "partitions"
_OWN = (INCLUDE, EXCLUDE, REPLICATION_FACTOR, PARTITIONS)

_INCLUDE_DOC = ("A list of regular expression literals used to match the topic names used by the source connector. "
                "This list is used to include topics that should be created using the topic settings defined by "
                "this group.")
_EXCLUDE_DOC = ("A list of regular expression literals used to match the topic names used by the source connector. "
                "This list is used to exclude topics from being created with the topic settings defined by this "
                "group. Note that exclusion rules have precedent and override any inclusion rules for the topics.")
_RF_DOC = ("The replication factor for new topics created for this connector using this group. This value may be "
           "-1 to use the broker's default replication factor, or may be a positive number not larger than the "
           "number of brokers in the Kafka cluster.")
_PARTITIONS_DOC = ("The number of partitions new topics created for this connector. This value may be -1 to use "
                   "the broker's default number of partitions, or a positive number representing the desired "
                   "number of partitions.")


def groups_key() -> ConfigKey:
    """``SourceConnectorConfig``'s ``topic.creation.groups``, defined for every source connector."""
    return ConfigKey(GROUPS, Type.LIST, [], unique_aliases, Importance.LOW,
                     "Groups of configurations for topics created by source connectors", GROUP, 1, Width.LONG,
                     "Topic Creation Groups")


def uses_topic_creation(props: Mapping[str, Any]) -> bool:
    """Kafka's ``SourceConnectorConfig.usesTopicCreation``: any ``topic.creation.`` key."""
    return any(str(k).startswith(PREFIX) for k in props)


def _replication_factor(name: str, value: Any) -> None:
    if value is not None and value != -1 and value < 1:
        raise Invalid("Replication factor must be positive and not larger than the number of brokers in the Kafka "
                      "cluster, or -1 to use the broker's default")


def _partitions(name: str, value: Any) -> None:
    if value is not None and value != -1 and value < 1:
        raise Invalid("Number of partitions must be positive, or -1 to use the broker's default")


def _regexes(name: str, value: Any) -> None:
    for pattern in value or ():
        try:
            re.compile(pattern)
        except re.error as e:
            raise Invalid(f"Syntax error in regular expression: {e}") from None


def _group_def(group: str, replication_factor: Any, partitions: Any) -> ConfigDef:
    """``TopicCreationConfig.configDef`` (a listed group: defaults from the default group) or
    ``defaultGroupConfigDef`` (``replication_factor`` and ``partitions`` NO_DEFAULT: required)."""
    default = group == DEFAULT_GROUP
    return ConfigDef([
        ConfigKey(INCLUDE, Type.LIST, ".*" if default else [], None if default else _regexes, Importance.LOW,
                  _INCLUDE_DOC, group, 1, Width.LONG, f"Inclusion Topic Pattern for {group}"),
        ConfigKey(EXCLUDE, Type.LIST, [], None if default else _regexes, Importance.LOW, _EXCLUDE_DOC, group, 2,
                  Width.LONG, f"Exclusion Topic Pattern for {group}"),
        ConfigKey(REPLICATION_FACTOR, Type.SHORT, replication_factor, _replication_factor, Importance.LOW, _RF_DOC,
                  group, 3, Width.LONG, f"Replication Factor for Topics in {group}"),
        ConfigKey(PARTITIONS, Type.INT, partitions, _partitions, Importance.LOW, _PARTITIONS_DOC, group, 4,
                  Width.LONG, f"Partition Count for Topics in {group}"),
    ])


def _aliases(props: Mapping[str, Any]) -> list[str]:
    raw = props.get(GROUPS)
    items = [a.strip() for a in raw.split(",")] if isinstance(raw, str) and raw.strip() else []
    # 'default' always exists and need not be listed (Kafka warns and drops it)
    return [a for a in dict.fromkeys(items) if a and a != DEFAULT_GROUP]


def enrich(base: ConfigDef, props: Mapping[str, Any]) -> ConfigDef:
    """A source connector's definitions with the topic-creation groups it uses: Kafka's
    ``embedDefaultGroup`` then ``SourceConnectorConfig.enrich``, so a missing default replication
    factor or partition count is named as Kafka's worker names it."""
    if not uses_topic_creation(props):
        return base
    out = base.copy()
    out.embed(f"{PREFIX}{DEFAULT_GROUP}.", DEFAULT_GROUP, 0, _group_def(DEFAULT_GROUP, NO_DEFAULT, NO_DEFAULT))
    default_values = _group_def(DEFAULT_GROUP, NO_DEFAULT, NO_DEFAULT).validate_all(
        {k[len(f"{PREFIX}{DEFAULT_GROUP}."):]: v for k, v in props.items()
         if k.startswith(f"{PREFIX}{DEFAULT_GROUP}.")})
    # a listed group's sizes default to the default group's (when those are valid: else that group
    # alone names the problem)
    rf, partitions = (None if v.errors else v.value for v in (default_values[REPLICATION_FACTOR],
                                                               default_values[PARTITIONS]))
    for alias in _aliases(props):
        label = f"{GROUP}: {alias}"
        out.embed(f"{PREFIX}{alias}.", label, 0, _group_def(label, rf, partitions))
    return out


@dataclass(frozen=True)
class TopicCreationGroup:
    """Kafka's ``TopicCreationGroup``: which topics it takes and how they are made."""
    name: str
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    replication_factor: int
    partitions: int
    configs: Mapping[str, str] = field(default_factory=dict)

    def matches(self, topic: str) -> bool:
        """Whole-name matches, as Java's ``Pattern.matcher(topic).matches()`` of the joined list."""
        def any_of(patterns: tuple[str, ...]) -> bool:
            return bool(patterns) and re.fullmatch("|".join(patterns), topic) is not None
        return not any_of(self.exclude) and any_of(self.include)


def configured_groups(values: Mapping[str, Any], props: Mapping[str, Any]) -> list[TopicCreationGroup]:
    """The listed groups in order, then ``default`` (Kafka's ``configuredGroups``); empty when the
    connector sets no ``topic.creation.`` key. ``values`` are the validated values."""
    if not uses_topic_creation(props):
        return []
    out = []
    for alias in [*_aliases(props), DEFAULT_GROUP]:
        prefix = f"{PREFIX}{alias}."
        include = (".*",) if alias == DEFAULT_GROUP else tuple(values.get(prefix + INCLUDE) or ())
        exclude = () if alias == DEFAULT_GROUP else tuple(values.get(prefix + EXCLUDE) or ())
        configs = {k[len(prefix):]: str(v) for k, v in props.items()
                   if k.startswith(prefix) and k[len(prefix):] not in _OWN and v is not None}
        out.append(TopicCreationGroup(alias, include, exclude, int(values[prefix + REPLICATION_FACTOR]),
                                      int(values[prefix + PARTITIONS]), configs))
    return out


def group_for(groups: list[TopicCreationGroup], topic: str) -> TopicCreationGroup | None:
    """Kafka's ``TopicCreation.findFirstGroup``: the first listed group matching ``topic``, else
    the default group (None when the connector creates no topics)."""
    if not groups:
        return None
    listed, default = groups[:-1], groups[-1]
    return next((g for g in listed if g.matches(topic)), default)


_T = "org.apache.kafka.connect.transforms."
_REGEX_ROUTER, _FILTER, _TOPIC_NAME_MATCHES = _T + "RegexRouter", _T + "Filter", _T + "predicates.TopicNameMatches"


class _Unknown(Exception):
    """A topic that only the records can say (a TimestampRouter, a record predicate)."""


def _java_replacement(match: re.Match, replacement: str) -> str:
    """Java's ``Matcher.appendReplacement`` text: ``$n`` (digits taken while they name a group),
    ``${name}``, ``\\x`` a literal x; a group that took no part adds nothing."""
    out, i, groups = [], 0, match.re.groups
    while i < len(replacement):
        ch = replacement[i]
        if ch == "\\" and i + 1 < len(replacement):
            out.append(replacement[i + 1])
            i += 2
            continue
        if ch != "$":
            out.append(ch)
            i += 1
            continue
        named = re.match(r"\{([A-Za-z][A-Za-z0-9]*)\}", replacement[i + 1:])
        if named is not None:
            if named.group(1) not in match.re.groupindex:
                raise _Unknown
            out.append(match.group(named.group(1)) or "")
            i += 1 + named.end()
            continue
        if i + 1 >= len(replacement) or not replacement[i + 1].isdigit() or int(replacement[i + 1]) > groups:
            raise _Unknown   # Java: IllegalArgumentException / IndexOutOfBounds, the records fail
        number, i = int(replacement[i + 1]), i + 2
        while i < len(replacement) and replacement[i].isdigit() and number * 10 + int(replacement[i]) <= groups:
            number, i = number * 10 + int(replacement[i]), i + 1
        out.append(match.group(number) or "")
    return "".join(out)


def _applies(spec: Any, predicates: Mapping[str, Any], topic: str) -> bool:
    """Whether ``spec`` acts on records of ``topic``: always without a predicate, by the name with
    ``TopicNameMatches``; any other predicate looks at the record (:class:`_Unknown`)."""
    if not spec.predicate:
        return True
    predicate = predicates.get(spec.predicate)
    if predicate is None or predicate.type != _TOPIC_NAME_MATCHES:
        raise _Unknown
    return (re.fullmatch(str(predicate.config.get("pattern")), topic) is not None) != bool(spec.negate)


def _routed(topic: str, transforms: Iterable[Any], predicates: Mapping[str, Any]) -> str | None:
    """``topic`` as the transforms leave it (None: every record of it is filtered out)."""
    for spec in transforms:
        if spec.type == _FILTER:
            try:
                if _applies(spec, predicates, topic):
                    return None
            except _Unknown:
                continue   # some records may pass: the topic is written
        elif spec.type == _REGEX_ROUTER:
            if not _applies(spec, predicates, topic):
                continue
            regex = str(spec.config.get("regex"))
            if re.fullmatch(regex, topic) is not None:
                first = re.match(f"(?:{regex})", topic)   # replaceFirst: the first match from the start
                topic = _java_replacement(first, str(spec.config.get("replacement") or "")) + topic[first.end():]
        elif spec.type.endswith(("TimestampRouter", "ExtractNewRecordState")):
            if (spec.type.endswith("ExtractNewRecordState") and not spec.config.get("route.by.field")) \
                    or not _applies(spec, predicates, topic):
                continue
            raise _Unknown
    return topic


def topics_known_at_start(declared: Iterable[str], transforms: Iterable[Any],
                          predicates: Iterable[Any] = ()) -> list[str]:
    """The connector's declared topics as its records will name them: renamed by each
    ``RegexRouter`` (Java's whole-name match and replacement), left out when a ``Filter`` drops
    all their records (no predicate, or ``TopicNameMatches``). Empty when a transform may route
    records elsewhere record by record (TimestampRouter, ExtractNewRecordState's
    ``route.by.field``, a router under a record predicate) or a pattern is not one Python's
    ``re`` reads as Java does: those topics are then created by the broker's auto-creation."""
    by_alias = {p.alias: p for p in predicates}
    out = []
    try:
        for topic in dict.fromkeys(declared):
            routed = _routed(topic, transforms, by_alias) if topic else None
            if routed:
                out.append(routed)
    except (_Unknown, re.error):
        return []
    return list(dict.fromkeys(out))


def create_topics(client_config: Mapping[str, Any], groups: list[TopicCreationGroup], topics: Iterable[str],
                  timeout: float = 30.0) -> list[str]:
    """Create those of ``topics`` that do not exist, each with its group's settings; returns the
    ones created. A topic that cannot be made fails the connector with Kafka's message (a
    :class:`~connect.errors.ConnectError`), as ``WorkerSourceTask.maybeCreateTopic`` fails its task."""
    from broker.client import AdminClient, NewTopic
    from broker.errors import TopicAlreadyExistsError

    from connect.errors import ConnectError
    wanted = [t for t in dict.fromkeys(topics) if t]
    if not groups or not wanted:
        return []
    admin = AdminClient(dict(client_config))
    created = []
    try:
        existing = set(admin.list_topics(timeout=timeout).topics)   # listTopics: never auto-creates
        for topic in wanted:
            if topic in existing:
                continue
            group = group_for(groups, topic)
            new = NewTopic(topic, group.partitions, group.replication_factor, config=dict(group.configs))
            try:
                admin.create_topics([new])[topic].result(timeout)
            except TopicAlreadyExistsError:
                continue
            except Exception as e:  # noqa: BLE001 - the connector fails, naming the topic and the group
                raise ConnectError(f"Task failed to create new topic {topic} (group '{group.name}': "
                                   f"{group.partitions} partitions, replication factor {group.replication_factor}): "
                                   f"{e}. Ensure that the task is authorized to create topics or that the topic "
                                   "exists and restart the task") from e
            log.info("created topic '%s' with the settings of topic creation group '%s'", topic, group.name)
            created.append(topic)
    finally:
        admin.close()
    return created


__all__ = ["DEFAULT_GROUP", "GROUPS", "TopicCreationGroup", "configured_groups", "create_topics", "enrich",
           "group_for", "groups_key", "topics_known_at_start", "uses_topic_creation"]
