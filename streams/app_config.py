"""A :class:`~streams.app.StreamsApp`'s config, as Kafka's ``StreamsConfig``: checked once when the
application is made (``application.id``, ``bootstrap.servers``, ``auto.offset.reset``,
``replication.factor``...), the keys nothing reads logged as Kafka's ``AbstractConfig.logUnused``
logs them, and each client's settings taken from under Kafka's client prefixes (``producer.``,
``consumer.``, ``main.consumer.``, ``admin.``) over the unprefixed keys that client has, less those
Riverlog sets itself. Kafka's own keys that Riverlog does not apply are still typed and range-checked
as Kafka's ``ConfigDef`` checks them (:mod:`streams.config_checks`), so a value Kafka refuses is
refused here too.
"""
from __future__ import annotations

import logging
import os
import tempfile

from broker.errors import InvalidConfigError
from streams.config_checks import kafka_number
from streams.interpreter import EXACTLY_ONCE_V2, at_least, streams_config
from streams.repartition_purge import PURGE_INTERVAL_MS_DEFAULT

log = logging.getLogger(__name__)

# Kafka's StreamsConfig keys Riverlog applies (the rest of StreamsConfig's keys are accepted and
# logged as not used, as Kafka's AbstractConfig.logUnused logs what no client read).
APPLIED = {
    "application.id", "bootstrap.servers", "processing.guarantee", "state.dir", "commit.interval.ms",
    "default.key.serde", "default.value.serde", "auto.offset.reset", "replication.factor",
    "maxOffsetsPerTrigger", "statestore.cache.max.bytes", "cache.max.bytes.buffering",
    "repartition.purge.interval.ms", "default.timestamp.extractor", "deserialization.exception.handler",
    "default.deserialization.exception.handler", "processing.exception.handler", "production.exception.handler",
    "default.production.exception.handler", "topology.optimization", "max.task.idle.ms",
    "windowstore.changelog.additional.retention.ms",
}
_TOPIC = "topic."   # StreamsConfig.TOPIC_PREFIX: every internal topic's configs (streams.internal_topics)
# Kafka's client prefixes (StreamsConfig.*_PREFIX) that reach a client here (restore.consumer.,
# global.consumer.: restores and global tables read through Spark's source; logged as unused),
# and the settings Riverlog decides itself for each client.
_PRODUCER, _CONSUMER, _MAIN_CONSUMER, _ADMIN = "producer.", "consumer.", "main.consumer.", "admin."
_OWN = {_PRODUCER: {"bootstrap.servers", "transactional.id", "enable.idempotence", "acks"},
        _CONSUMER: {"bootstrap.servers", "group.id", "isolation.level", "auto.offset.reset", "enable.auto.commit"},
        _ADMIN: {"bootstrap.servers"}}
# Kafka's StreamsConfig keys whose meaning is Streams' own even where a client has the same name
# (Kafka names each client ``<client.id>-StreamThread-<n>-consumer`` itself).
_STREAMS_OWN = {"application.id", "bootstrap.servers", "client.id"}
# The keys of Kafka's ProducerConfig / ConsumerConfig / AdminClientConfig that Riverlog's clients
# have (Kafka's names only: a librdkafka-only key is not a Kafka client config), less those Streams or
# Riverlog decide (above).
_COMMON = {"metadata.max.age.ms", "reconnect.backoff.ms", "reconnect.backoff.max.ms", "request.timeout.ms",
           "retry.backoff.ms"}
_NAMES = {
    _PRODUCER: frozenset(_COMMON | {"batch.size", "buffer.memory", "compression.type", "delivery.timeout.ms",
                                    "linger.ms", "max.block.ms", "max.in.flight.requests.per.connection",
                                    "max.request.size", "retries", "transaction.timeout.ms"}),
    _CONSUMER: frozenset(_COMMON | {"allow.auto.create.topics", "auto.commit.interval.ms", "check.crcs",
                                    "fetch.max.bytes", "fetch.max.wait.ms", "fetch.min.bytes",
                                    "heartbeat.interval.ms", "max.partition.fetch.bytes", "max.poll.interval.ms",
                                    "session.timeout.ms"}),
    _ADMIN: frozenset(_COMMON),
}
REPLICATION_FACTOR_DEFAULT = -1     # Kafka's: the broker's default.replication.factor


def _config(config: dict) -> dict:
    c = dict(config)
    for key in ("application.id", "bootstrap.servers"):
        if not c.get(key):      # Kafka's ConfigException for a required key
            raise InvalidConfigError(f"Missing required configuration \"{key}\" which has no default value.",
                                     config=key)
    c = streams_config(c)
    c.setdefault("state.dir", os.path.join(tempfile.gettempdir(), "riverlog-streams"))
    c["auto.offset.reset"] = _reset_policy(c)
    rf = c.get("replication.factor")
    c["replication.factor"] = REPLICATION_FACTOR_DEFAULT if rf is None else kafka_number("replication.factor", rf, "INT")
    if c["replication.factor"] == 0 or c["replication.factor"] < -1:
        raise InvalidConfigError(f"replication.factor {c['replication.factor']}: expected a number of replicas "
                                 f">= 1, or -1 for the broker's default.replication.factor", config="replication.factor")
    c["repartition.purge.interval.ms"] = at_least(c, "repartition.purge.interval.ms", PURGE_INTERVAL_MS_DEFAULT)
    if c["max.task.idle.ms"] > 0:
        log.warning("max.task.idle.ms=%s is not applied on Spark: a micro-batch holds what each input partition "
                    "had when it started, and its records are merged by timestamp", c["max.task.idle.ms"])
    if c["processing.guarantee"] == EXACTLY_ONCE_V2:
        _check_in_flight(_client(c, _PRODUCER).get(_IN_FLIGHT))
    _log_unused(c)
    return c


_RESET = "auto.offset.reset"


def _reset_policy(c: dict) -> str:
    """The main consumer's ``auto.offset.reset`` as Kafka's ``getMainConsumerConfigs`` takes it:
    ``main.consumer.`` over ``consumer.`` over the plain key, else Streams' ``earliest``. It is
    the policy of every source without its own ``Consumed.withOffsetResetPolicy``."""
    policy = "earliest"
    for key in (_RESET, _CONSUMER + _RESET, _MAIN_CONSUMER + _RESET):
        if key in c:
            policy = c[key]
            if policy not in ("earliest", "latest", "none"):
                raise InvalidConfigError(f"Invalid value {policy} for configuration {key}: String must be one of: "
                                         f"latest, earliest, none", config=key)     # ConsumerConfig's in(...)
    return policy


_IN_FLIGHT = "max.in.flight.requests.per.connection"


def _check_in_flight(value) -> None:
    """Kafka's ``verifyMaxInFlightRequestPerConnection``: under exactly-once the producer keeps at
    most 5 requests in flight, refused when the application is made (not by the first batch)."""
    if value is None:
        return
    try:
        number = int(value.strip()) if isinstance(value, str) else value
    except ValueError:
        number = None
    if isinstance(number, bool) or not isinstance(number, int):
        why = ("String value could not be parsed as 32-bit integer" if isinstance(value, str)
               else f"Expected value to be a 32-bit integer, but it was a {type(value).__name__}")
        raise InvalidConfigError(f"Invalid value {value} for configuration {_IN_FLIGHT}: {why}", config=_IN_FLIGHT)
    if number > 5:
        raise InvalidConfigError(f"Invalid value {number} for configuration {_IN_FLIGHT}: Can't exceed 5 when "
                                 f"exactly-once processing is enabled", config=_IN_FLIGHT)


def _kind(prefix: str) -> str:
    return _CONSUMER if prefix == _MAIN_CONSUMER else prefix


def _names(prefix: str) -> frozenset[str]:
    """The keys the client under ``prefix`` takes unprefixed from the application's config, as
    Kafka's ``getClientPropsWithPrefix`` takes every original key in the client's ``configNames()``."""
    return _NAMES[_kind(prefix)]


def _client(config: dict, *prefixes: str) -> dict:
    """A client's settings: the unprefixed keys it has (``request.timeout.ms`` reaches every
    client, ``linger.ms`` the producer), then those under Kafka's client ``prefixes`` over them (a
    later prefix wins, as Kafka's ``main.consumer.`` over ``consumer.``), less those Riverlog sets
    itself for that client."""
    names = _names(prefixes[0])
    out = {k: v for k, v in config.items() if k in names}
    for prefix in prefixes:
        own = _OWN[_kind(prefix)]
        for k, v in config.items():
            if k.startswith(prefix) and k[len(prefix):] not in own:
                out[k[len(prefix):]] = v
    return out


def _log_unused(c: dict) -> None:
    """Kafka's ``AbstractConfig.logUnused``, once per application: the keys nothing here reads."""
    unused, own = [], []
    clients = _names(_PRODUCER) | _names(_CONSUMER) | _names(_ADMIN)
    set_here = (set(_OWN[_PRODUCER]) | set(_OWN[_CONSUMER])) - APPLIED - _STREAMS_OWN
    for k in sorted(c):
        if k.startswith(_TOPIC) or k in clients:
            continue
        if k in set_here:       # e.g. isolation.level, acks: Kafka overrides them too
            own.append(k)
            continue
        if k in APPLIED or k.startswith((_PRODUCER, _CONSUMER, _MAIN_CONSUMER, _ADMIN)):
            prefix = next((p for p in (_MAIN_CONSUMER, _PRODUCER, _CONSUMER, _ADMIN) if k.startswith(p)), None)
            if prefix is not None and k[len(prefix):] in _OWN[_CONSUMER if prefix == _MAIN_CONSUMER else prefix] \
                    and k not in (_CONSUMER + _RESET, _MAIN_CONSUMER + _RESET):     # applied: _reset_policy
                own.append(k)
            continue
        unused.append(k)
    if unused:
        log.info("These configurations '%s' were supplied but are not used yet.", unused)
    if own:
        log.warning("These configurations '%s' are set by Riverlog Streams itself and were ignored.", own)
