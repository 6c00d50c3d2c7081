"""Client configuration under Kafka's (and librdkafka's) names, parsed once per client.

Every key is typed and validated once, when the client is made; an unknown key is refused with
a message naming it, so a typo never passes silently. As librdkafka does, a client accepts the
other client type's keys (one dict configures a Producer and a Consumer) and librdkafka's generic
keys whose work Riverlog's transport does itself, ignoring both with a one-time warning.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping

from broker.client.partitioner import PARTITIONERS
from broker.config import INT_MAX, ConfigDef, ConfigKey, at_least, between, one_of
from broker.errors import InvalidConfigError, KafkaError
from broker.protocol import assignment_strategies

DEBUG_CONTEXTS = {
    "generic": ("broker.client",), "all": ("broker.client",),
    "broker": ("broker.client.cluster", "broker.client.produce_stream"),
    "topic": ("broker.client.cluster",), "metadata": ("broker.client.cluster",),
    "protocol": ("broker.client.cluster", "broker.client.produce_stream"),
    "producer": ("broker.client.producer", "broker.client.sender", "broker.client.send_policy",
                 "broker.client.accumulator"),
    "queue": ("broker.client.accumulator",), "msg": ("broker.client.sender", "broker.client.send_policy"),
    "eos": ("broker.client.transactions", "broker.client.txn_requests", "broker.client.exactly_once"),
    "consumer": ("broker.client.consumer", "broker.client.fetcher", "broker.client.fetch_state"),
    "fetch": ("broker.client.fetcher", "broker.client.fetch_state"),
    "cgrp": ("broker.client.membership", "broker.client.committer", "broker.client.coordinator"),
    "assignor": ("broker.client.membership",), "admin": ("broker.client.admin", "broker.client.group_admin",
                                                         "broker.client.txn_admin"),
    "conf": ("broker.client.config",),
}
"""librdkafka's ``debug`` contexts, and the Riverlog client loggers each one turns to DEBUG."""


def _debug_contexts(value: str) -> str | None:
    unknown = [c for c in value.split(",") if c.strip() and c.strip() not in DEBUG_CONTEXTS]
    return f"has unknown context(s) {', '.join(unknown)}; known: {', '.join(sorted(DEBUG_CONTEXTS))}" \
        if unknown else None

_COMMON = [
    ConfigKey("bootstrap.servers", str, "", "comma-separated host:port list of brokers to start from"),
    ConfigKey("client.id", str, "riverlog-python", "name sent with requests, for logs"),
    ConfigKey("request.timeout.ms", int, 30_000, "how long to wait for a broker's answer", between(1, INT_MAX)),
    ConfigKey("retry.backoff.ms", int, 100, "pause before retrying a failed request", at_least(0)),
    ConfigKey("reconnect.backoff.ms", int, 50, "first pause before reconnecting to a broker", at_least(1)),
    ConfigKey("reconnect.backoff.max.ms", int, 1000, "longest pause between reconnection attempts",
              at_least(1)),
    ConfigKey("metadata.max.age.ms", int, 300_000, "refresh cluster metadata at least this often", at_least(0)),
    ConfigKey("error_cb", object, None, "callback(KafkaError) for client-level errors, called from poll()"),
    ConfigKey("stats_cb", object, None, "callback(json_str) with client statistics every statistics.interval.ms"),
    ConfigKey("statistics.interval.ms", int, 0, "how often stats_cb runs (from poll()); 0: never",
              between(0, 86_400_000)),
    ConfigKey("logger", object, None, "a logging.Logger that receives the client's log records"),
    ConfigKey("debug", str, "", "comma-separated librdkafka debug contexts (e.g. consumer,cgrp): DEBUG logs",
              _debug_contexts),
]

# librdkafka's names Python users pass for keys Riverlog has under Kafka's name: (alias, key, convert).
_ALIASES = [
    ("message.timeout.ms", "delivery.timeout.ms", None),
    ("queue.buffering.max.ms", "linger.ms", None),
    ("queue.buffering.max.kbytes", "buffer.memory", lambda v: int(v) * 1024),
    ("compression.codec", "compression.type", None),
    ("socket.timeout.ms", "request.timeout.ms", None),
    ("topic.metadata.refresh.interval.ms", "metadata.max.age.ms", None),
    ("fetch.wait.max.ms", "fetch.max.wait.ms", None),
    ("request.required.acks", "acks", None),
    ("max.in.flight", "max.in.flight.requests.per.connection", None),
    ("message.send.max.retries", "retries", None),
    ("fetch.message.max.bytes", "max.partition.fetch.bytes", None),
    ("metadata.broker.list", "bootstrap.servers", None),
    ("auto.commit.enable", "enable.auto.commit", None),
]

# librdkafka's properties (its CONFIGURATION.md) for work Riverlog's gRPC transport and protocol do
# themselves (sockets, DNS, API versions, its log levels, metrics push, the group protocol:
# always KIP-848's): accepted so a confluent-kafka configuration works unchanged, and ignored.
_LIBRDKAFKA_IGNORED = frozenset({
    "api.version.request", "api.version.fallback.ms", "broker.version.fallback", "broker.address.family",
    "client.dns.lookup", "client.rack", "connections.max.idle.ms", "enable.metrics.push",
    "enable.ssl.certificate.verification", "group.protocol", "log_level", "log.connection.close",
    "retry.backoff.max.ms", "socket.keepalive.enable", "socket.nagle.disable", "socket.receive.buffer.bytes",
    "socket.send.buffer.bytes",
    # logging, sockets and metadata-refresh pacing of librdkafka's own threads
    "log.thread.name", "log.queue", "enable.random.seed", "internal.termination.signal",
    "socket.connection.setup.timeout.ms", "socket.max.fails", "socket.blocking.max.ms", "broker.address.ttl",
    "api.version.request.timeout.ms", "reconnect.backoff.jitter.ms", "message.copy.max.bytes",
    "receive.message.max.bytes", "topic.metadata.refresh.fast.interval.ms", "topic.metadata.refresh.fast.cnt",
    "topic.metadata.refresh.sparse", "metadata.recovery.strategy", "metadata.recovery.rebootstrap.trigger.ms",
    "coordinator.query.interval.ms", "fetch.error.backoff.ms", "fetch.queue.backoff.ms", "queued.min.messages",
    "produce.offset.report",
})

log = logging.getLogger(__name__)
_warned: set[tuple[str, str]] = set()

_REFUSED_PREFIXES = {
    "ssl.": "Riverlog's listeners speak plaintext gRPC; put TLS in front of them (a proxy or a service mesh)",
    "sasl.": "Riverlog has no authentication; restrict who reaches the listeners on the network instead",
}
_SECURITY = "security.protocol"


def client_config(kind: "ConfigDef", config: dict | None, kwargs: dict):
    """confluent-kafka's ways to configure a client, parsed once: ``Client(conf)``, ``Client(**conf)``
    or both (neither, or a conf that is not a dict, is confluent's TypeError "expected configuration
    dict"); the deprecated ``default.topic.config`` dict is merged in, over the top-level keys, as
    confluent-kafka merges it; librdkafka's alias names become Kafka's (giving both with different
    values fails). A bad key or value raises InvalidConfigError reported as librdkafka reports it:
    ``_INVALID_ARG``, with its message first (``No such configuration property: "x"``, ``Invalid
    value for configuration property "x": v``), then Riverlog's."""
    if config is None and not kwargs or config is not None and not isinstance(config, Mapping):
        raise TypeError("expected configuration dict")
    values = {**(config or {}), **kwargs}
    topic_level = values.pop("default.topic.config", None)
    if topic_level is not None:
        if not isinstance(topic_level, Mapping):
            raise TypeError("default.topic.config must be a dict")
        values.update(topic_level)
    for name in list(values):
        for prefix, reason in _REFUSED_PREFIXES.items():
            if name.startswith(prefix):
                raise InvalidConfigError(f"{kind.what} configuration '{name}' is not supported: {reason}", config=name)
    if _SECURITY in values:
        if str(values[_SECURITY]).lower() != "plaintext":
            raise InvalidConfigError(f"{_SECURITY}={values[_SECURITY]!r} is not supported: "
                                     f"{_REFUSED_PREFIXES['ssl.']}", config=_SECURITY)
        del values[_SECURITY]
    _drop_ignored(kind, values)
    for alias, name, convert in _ALIASES:
        if alias in values and name in kind.keys:
            value = values.pop(alias)
            value = convert(value) if convert and value is not None else value
            if name in values and values[name] is not None and str(values[name]) != str(value):
                raise InvalidConfigError(f"'{alias}' is librdkafka's name for '{name}'; give one of them, "
                                         f"not both with different values", config=alias)
            values[name] = value
    _check_callbacks(kind, values)
    for name in values:
        if name not in kind.keys:
            raise _invalid(f'No such configuration property: "{name}"',
                           f"unknown {kind.what} configuration '{name}'", name)
    try:
        return kind.parse(values)
    except InvalidConfigError as e:
        name = e.details.get("config")
        raise _invalid(f'Invalid value for configuration property "{name}": {values.get(name)}', e.message,
                       name) from None


def _invalid(librdkafka: str, riverlog: str, name: str | None) -> InvalidConfigError:
    """A configuration error as confluent-kafka raises it: a KafkaException whose KafkaError is
    ``_INVALID_ARG`` and whose message starts with librdkafka's."""
    error = InvalidConfigError(f"{librdkafka} ({riverlog})", config=name)
    return error.reported_as(kafka_code=KafkaError._INVALID_ARG)


# confluent-kafka's callable checks: the generic callbacks are TypeErrors, the client types' own
# callbacks KafkaExceptions (_INVALID_ARG), so a non-callable fails here, not later in poll().
_GENERIC_CALLBACKS = ("error_cb", "stats_cb")
_CLIENT_CALLBACKS = ("on_delivery", "on_commit")


def _check_callbacks(kind: "ConfigDef", values: dict) -> None:
    for name in _GENERIC_CALLBACKS:
        if values.get(name) is not None and not callable(values[name]):
            raise TypeError(f"expected {name} property as a callable function")
    for name in _CLIENT_CALLBACKS:
        if name in kind.keys and values.get(name) is not None and not callable(values[name]):
            raise _invalid(f"{name} requires a callable object", f"{kind.what} configuration '{name}'", name)


def _drop_ignored(kind: "ConfigDef", values: dict) -> None:
    """Take out the keys this client type accepts and ignores, as librdkafka does: the other
    client type's (not its Python callbacks, which confluent-kafka refuses) and ``_LIBRDKAFKA_IGNORED``."""
    for name in list(values):
        if name in kind.keys or any(alias == name and target in kind.keys for alias, target, _ in _ALIASES):
            continue
        if name in _LIBRDKAFKA_IGNORED:
            _warn_once(kind, name, f"{kind.what} configuration '{name}' is librdkafka's and has no effect on "
                                   "Riverlog's client: ignored")
        else:
            owner = _owner(kind, name)
            if owner is None:
                continue  # a typo: parse() refuses it by name
            _warn_once(kind, name, f"Configuration property {name} is a {owner} property and will be ignored "
                                   f"by this {kind.what} instance")
        del values[name]


def _owner(kind: "ConfigDef", name: str) -> str | None:
    """The client type (producer, consumer) whose key ``name`` is (or whose key it is librdkafka's
    name for), when it is not ``kind``'s; None for a name no client type has."""
    for other in (PRODUCER_CONFIG, CONSUMER_CONFIG):
        if other is kind:
            continue
        target = next((t for alias, t, _ in _ALIASES if alias == name), name)
        key = other.keys.get(target)
        if key is not None and key.type is not object and target not in kind.keys:
            return other.what
    return None


def _warn_once(kind: "ConfigDef", name: str, message: str) -> None:
    if (kind.what, name) not in _warned:
        _warned.add((kind.what, name))
        log.warning("%s", message)


def idempotence(cfg, acks: int) -> bool:
    """Kafka 3's rule: on by default with acks=all; asked for explicitly, or implied by
    ``transactional.id`` (librdkafka's ``rd_kafka_conf_finalize``), it needs acks=all, retries and
    at most 5 requests in flight, refused otherwise with librdkafka's message and ``_INVALID_ARG``."""
    wanted = cfg["enable.idempotence"]
    if cfg["transactional.id"]:
        if wanted is False:
            raise _refused("`transactional.id` requires `enable.idempotence=true`", "transactional.id")
        wanted = True
    problem = ("`acks` must be set to `all` when `enable.idempotence` is true" if acks != -1 else
               "`retries` must be set >= 1 when `enable.idempotence` is true" if cfg["retries"] < 1 else
               "`max.in.flight` must be set <= 5 when `enable.idempotence` is true"
               if cfg["max.in.flight.requests.per.connection"] > 5 else None)
    if wanted and problem:
        raise _refused(problem, "enable.idempotence")
    return problem is None if wanted is None else bool(wanted)


def sticky_linger_s(cfg) -> float:
    """``sticky.partitioning.linger.ms`` in seconds; unset, twice ``linger.ms`` (at most 900 s), as
    librdkafka's ``rd_kafka_conf_finalize`` sets it (10 ms with the default linger.ms=5)."""
    ms = cfg["sticky.partitioning.linger.ms"]
    return (min(900_000.0, 2 * cfg["linger.ms"]) if ms is None else ms) / 1000.0


def _refused(problem: str, name: str) -> InvalidConfigError:
    return InvalidConfigError(f"Failed to create producer: {problem}", config=name).reported_as(
        kafka_code=KafkaError._INVALID_ARG)


PRODUCER_CONFIG = ConfigDef("producer", _COMMON + [
    ConfigKey("acks", str, "all", "0: no wait, 1: leader wrote it, all/-1: every in-sync replica has it",
              one_of("0", "1", "all", "-1")),
    ConfigKey("linger.ms", float, 5.0, "wait up to this long for more records before sending a batch",
              between(0, 900_000)),
    ConfigKey("batch.size", int, 1_000_000, "largest batch in bytes per partition", between(1, INT_MAX)),
    ConfigKey("batch.num.messages", int, 10_000, "largest batch in records; a topic's buffer holding this many "
              "is sent without waiting for linger.ms (librdkafka's)", between(1, 1_000_000)),
    ConfigKey("buffer.memory", int, 268_435_456, "bytes of records buffered before produce() says the queue is full",
              at_least(1024)),
    ConfigKey("max.block.ms", int, 60_000, "how long produce_batch waits for buffer space", at_least(0)),
    ConfigKey("compression.type", str, "none", "Arrow buffer compression of batch bodies",
              one_of("none", "lz4", "zstd")),
    ConfigKey("retries", int, INT_MAX, "how often a retriable failure is retried", between(0, INT_MAX)),
    ConfigKey("delivery.timeout.ms", int, 120_000, "give up on a record this long after produce(); 0: never "
              "(librdkafka's message.timeout.ms=0)", between(0, INT_MAX)),
    ConfigKey("message.max.bytes", int, 1_000_000, "largest single record (key + value + headers)",
              between(1, INT_MAX)),
    ConfigKey("max.request.size", int, 16_777_216, "largest produce request in bytes", between(1024, INT_MAX)),
    ConfigKey("max.in.flight.requests.per.connection", int, 5,
              "unanswered produce requests per broker (a partition never has two)", between(1, 1000)),
    ConfigKey("topic.metadata.propagation.max.ms", int, 30_000,
              "how long records for an unknown topic wait for it to appear", between(0, INT_MAX)),
    ConfigKey("sticky.partitioning.linger.ms", int, None,
              "unkeyed records stick to one random partition this long (default: 2 x linger.ms, as librdkafka); "
              "0: a random partition for each record", between(0, 900_000)),
    ConfigKey("partitioner", str, "murmur2_random",
              "librdkafka's partitioners (broker/client/partitioner.py); the default is Kafka's Java client's "
              "(librdkafka's is consistent_random); null keys of the *_random ones: sticky.partitioning.linger.ms",
              one_of(*PARTITIONERS)),
    ConfigKey("queue.buffering.max.messages", int, 100_000,
              "records buffered (not yet delivered) before produce() raises BufferError", between(1, INT_MAX)),
    ConfigKey("enable.idempotence", bool, None,
              "no duplicates from retries, per partition (default: on when acks=all, as in Kafka 3+)"),
    ConfigKey("transactional.id", str, "", "makes the producer transactional (docs/transactions.md)"),
    ConfigKey("transaction.timeout.ms", int, 60_000, "the coordinator aborts a transaction open longer than this",
              between(1, INT_MAX)),
    ConfigKey("on_delivery", object, None, "default delivery callback(err, msg)"),
    ConfigKey("delivery.report.only.error", bool, False, "delivery callbacks only for records that failed"),
])

CONSUMER_CONFIG = ConfigDef("consumer", _COMMON + [
    ConfigKey("group.id", str, "", "consumer group: needed by subscribe(), commit() and committed()"),
    ConfigKey("group.instance.id", str, "", "static membership id"),
    ConfigKey("allow.auto.create.topics", bool, True,
              "subscribing to or assigning an unknown topic creates it on a broker with auto.create.topics.enable "
              "(Kafka's Java consumer default; librdkafka's is false)"),
    ConfigKey("auto.offset.reset", str, "latest",
              "where to start without a valid position: earliest, latest or error",
              one_of("earliest", "smallest", "beginning", "latest", "largest", "end", "error", "none")),
    ConfigKey("enable.auto.commit", bool, True, "commit positions every auto.commit.interval.ms (from poll())"),
    ConfigKey("enable.auto.offset.store", bool, True,
              "poll() stores each returned record's offset for commit; false: only store_offsets() does"),
    ConfigKey("heartbeat.interval.ms", int, 3000, "how often a group member heartbeats when nothing moves",
              between(1, INT_MAX)),
    ConfigKey("on_commit", object, None, "callback(err, partitions) after each asynchronous commit"),
    ConfigKey("auto.commit.interval.ms", int, 5000, "how often auto-commit runs", between(0, INT_MAX)),
    ConfigKey("session.timeout.ms", int, 45_000, "group session timeout", between(1, INT_MAX)),
    ConfigKey("max.poll.interval.ms", int, 300_000, "longest pause between polls in a group", between(1, INT_MAX)),
    ConfigKey("partition.assignment.strategy", str, "range",
              "group assignor, run by the coordinator: range, roundrobin (eager) or cooperative-sticky",
              lambda v: assignment_strategies(v)[1]),
    ConfigKey("fetch.min.bytes", int, 1, "bytes a fetch waits for before answering", between(0, INT_MAX)),
    ConfigKey("fetch.max.wait.ms", int, 500, "longest a fetch waits for fetch.min.bytes", between(0, INT_MAX)),
    ConfigKey("fetch.max.bytes", int, 52_428_800, "largest fetch response", between(1, INT_MAX)),
    ConfigKey("max.partition.fetch.bytes", int, 1_048_576, "largest data per partition per fetch", between(1, INT_MAX)),
    ConfigKey("queued.max.messages.kbytes", int, 65_536, "prefetched data held before fetching pauses",
              between(1, 2_097_151)),
    ConfigKey("isolation.level", str, "read_committed", "read_committed or read_uncommitted",
              one_of("read_committed", "read_uncommitted")),
    ConfigKey("enable.partition.eof", bool, False, "poll() reports reaching a partition's end"),
    ConfigKey("check.crcs", bool, True, "verify each fetched batch's CRC-32C"),
])

ADMIN_CONFIG = ConfigDef("admin", _COMMON)
