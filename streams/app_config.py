"""A :class:`~streams.app.StreamsApp`'s config, as Kafka's ``StreamsConfig``: checked once when the
application is made (``application.id``, ``bootstrap.servers``, ``auto.offset.reset``,
``replication.factor``...), the keys nothing reads logged as Kafka's ``AbstractConfig.logUnused``
logs them, and each client's settings taken from under Kafka's client prefixes (``producer.``,
``consumer.``, ``main.consumer.``, ``admin.``), less those Riverlog sets itself.
"""
from __future__ import annotations

import logging
import os
import tempfile

from broker.errors import InvalidConfigError
from streams.errors import TopologyError
from streams.interpreter import at_least, streams_config
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
REPLICATION_FACTOR_DEFAULT = -1     # Kafka's: the broker's default.replication.factor


def _config(config: dict) -> dict:
    c = dict(config)
    for key in ("application.id", "bootstrap.servers"):
        if not c.get(key):
            raise TopologyError(f"config '{key}' is required")
    c = streams_config(c)
    c.setdefault("state.dir", os.path.join(tempfile.gettempdir(), "riverlog-streams"))
    reset = c.setdefault("auto.offset.reset", "earliest")
    if reset not in ("earliest", "latest"):
        raise InvalidConfigError(f"auto.offset.reset {reset!r}: expected earliest or latest", config="auto.offset.reset")
    try:
        c["replication.factor"] = int(c.get("replication.factor", REPLICATION_FACTOR_DEFAULT))
    except (TypeError, ValueError):
        raise InvalidConfigError(f"replication.factor {c['replication.factor']!r}: expected a number of replicas, "
                                 f"or -1 for the broker's default.replication.factor",
                                 config="replication.factor") from None
    if c["replication.factor"] == 0 or c["replication.factor"] < -1:
        raise InvalidConfigError(f"replication.factor {c['replication.factor']}: expected a number of replicas "
                                 f">= 1, or -1 for the broker's default.replication.factor", config="replication.factor")
    c["repartition.purge.interval.ms"] = at_least(c, "repartition.purge.interval.ms", PURGE_INTERVAL_MS_DEFAULT,
                                                  "milliseconds >= 0")
    if c["max.task.idle.ms"] > 0:
        log.warning("max.task.idle.ms=%s is not applied on Spark: a micro-batch holds what each input partition "
                    "had when it started, and its records are merged by timestamp", c["max.task.idle.ms"])
    _log_unused(c)
    return c


def _client(config: dict, *prefixes: str) -> dict:
    """The settings given under Kafka's client ``prefixes`` (a later prefix wins, as Kafka's
    ``main.consumer.`` over ``consumer.``), less those Riverlog sets itself for that client."""
    out = {}
    for prefix in prefixes:
        own = _OWN[_CONSUMER if prefix == _MAIN_CONSUMER else prefix]
        for k, v in config.items():
            if k.startswith(prefix) and k[len(prefix):] not in own:
                out[k[len(prefix):]] = v
    return out


def _log_unused(c: dict) -> None:
    """Kafka's ``AbstractConfig.logUnused``, once per application: the keys nothing here reads."""
    unused, own = [], []
    for k in sorted(c):
        if k.startswith(_TOPIC):
            continue
        if k in APPLIED or k.startswith((_PRODUCER, _CONSUMER, _MAIN_CONSUMER, _ADMIN)):
            prefix = next((p for p in (_MAIN_CONSUMER, _PRODUCER, _CONSUMER, _ADMIN) if k.startswith(p)), None)
            if prefix is not None and k[len(prefix):] in _OWN[_CONSUMER if prefix == _MAIN_CONSUMER else prefix]:
                own.append(k)
            continue
        unused.append(k)
    if unused:
        log.info("These configurations '%s' were supplied but are not used yet.", unused)
    if own:
        log.warning("These configurations '%s' are set by Riverlog Streams itself and were ignored.", own)
