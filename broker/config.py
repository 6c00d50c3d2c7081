"""Typed configuration under Kafka's names, validated once.

A :class:`ConfigDef` lists keys with their type, default, validator and a one-line doc; ``parse``
turns user input (strings from a properties file or the CLI, or Python values) into a frozen
:class:`Config`, raising :class:`InvalidConfigError` that names the offending key and the allowed
range. Ranges follow Kafka's types: a key Kafka declares INT (sizes, counts, most timeouts) stays
within int32, SHORT (replication factors) within int16, and every integer within int64, so no
value can overflow where it ends up (a batch length, an int32 field on the wire, a deadline).
Broker and topic definitions live here; the client's live in ``broker.client.config``.

    cfg = TOPIC_CONFIG.parse({"segment.bytes": "1048576"}, defaults=broker_cfg.topic_defaults())
    cfg["segment.bytes"]  # 1048576
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping

from broker.errors import InvalidConfigError

LONG_MIN, LONG_MAX = -2**63, 2**63 - 1
INT_MAX = 2**31 - 1
SHORT_MAX = 2**15 - 1


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: type
    default: Any
    doc: str
    validator: Callable[[Any], str | None] | None = None
    broker_default: str | None = None  # topic keys: the broker key that supplies the default


def at_least(low):
    return lambda v: None if v >= low else f"must be at least {low}"


def between(low, high):
    return lambda v: None if low <= v <= high else f"must be between {low} and {high}"


def one_of(*choices):
    return lambda v: None if v in choices else f"must be one of {', '.join(map(str, choices))}"


def _coerce(key: ConfigKey, value: Any) -> Any:
    if key.type is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "1", "yes"):
            return True
        if text in ("false", "0", "no"):
            return False
        raise ValueError("must be true or false")
    if key.type is int:
        if isinstance(value, bool):
            raise ValueError("must be an integer")
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return int(str(value).strip()) if not isinstance(value, int) else value
    if key.type is float:
        return float(value)
    if key.type is str:
        return str(value).strip()
    return value


def _out_of_type_range(key: ConfigKey, value: Any) -> str | None:
    if key.type is int and value > LONG_MAX:
        return f"must be at most {LONG_MAX} (a 64-bit integer)"
    if key.type is int and value < LONG_MIN:
        return f"must be at least {LONG_MIN} (a 64-bit integer)"
    if key.type is float and not math.isfinite(value):
        return "must be a finite number"
    return None


class Config(Mapping):
    """An immutable, validated set of configuration values (overrides remembered separately)."""

    def __init__(self, definition: "ConfigDef", values: dict, overrides: dict):
        self._definition = definition
        self._values = MappingProxyType(values)
        self.overrides = MappingProxyType(overrides)

    def __getitem__(self, name):
        return self._values[name]

    def __iter__(self):
        return iter(self._values)

    def __len__(self):
        return len(self._values)

    def __repr__(self):
        return f"Config({dict(self.overrides)!r})"

    def with_overrides(self, overrides: Mapping, *, defaults: Mapping | None = None) -> "Config":
        return self._definition.parse(overrides, defaults=defaults)


class ConfigDef:
    def __init__(self, what: str, keys: Iterable[ConfigKey], refused: Mapping[str, str] | None = None,
                 check: Callable[[Mapping], "InvalidConfigError | None"] | None = None):
        """``refused``: names Kafka has that are not supported here, each with the reason and what
        to do instead; setting one fails with that reason rather than being accepted and ignored.
        ``check``: a rule across keys, given the parsed values (Kafka's ``validateValues``)."""
        self.what = what
        self.keys = {k.name: k for k in keys}
        self.refused = dict(refused or {})
        self.check = check

    def parse(self, values: Mapping | None = None, *, defaults: Mapping | None = None,
              ignore: Iterable[str] = ()) -> Config:
        """Validate ``values``; ``defaults`` replaces built-in defaults (e.g. from the broker)."""
        values = dict(values or {})
        ignored = set(ignore)
        out, overrides = {}, {}
        for name in values:
            if name in self.refused and name not in ignored:
                raise InvalidConfigError(f"{self.what} configuration '{name}' is not supported: {self.refused[name]}",
                                         config=name)
            if name not in self.keys and name not in ignored:
                raise InvalidConfigError(f"unknown {self.what} configuration '{name}'", config=name)
        for name, key in self.keys.items():
            if name in values and values[name] is not None:
                raw = values[name]
                overrides[name] = self._check(key, raw)
                out[name] = overrides[name]
            elif defaults is not None and name in defaults:
                out[name] = defaults[name]
            else:
                out[name] = key.default
        problem = self.check(out) if self.check is not None else None
        if problem is not None:
            raise problem
        return Config(self, out, overrides)

    def _check(self, key: ConfigKey, raw: Any) -> Any:
        try:
            value = _coerce(key, raw)
        except (TypeError, ValueError) as e:
            raise InvalidConfigError(
                f"invalid value {raw!r} for {self.what} configuration '{key.name}': "
                f"{e if 'must' in str(e) else 'must be of type ' + key.type.__name__}",
                config=key.name) from None
        problem = (key.validator(value) if key.validator else None) or _out_of_type_range(key, value)
        if problem:
            raise InvalidConfigError(
                f"invalid value {raw!r} for {self.what} configuration '{key.name}': {problem}",
                config=key.name)
        return value

    def describe(self) -> list[ConfigKey]:
        return sorted(self.keys.values(), key=lambda k: k.name)


def _cleanup_policy(value: str) -> str | None:
    parts = sorted(p.strip() for p in value.split(",") if p.strip())
    if not parts or any(p not in ("delete", "compact") for p in parts):
        return "must be delete, compact or compact,delete"
    return None


# Topic configs Kafka types LIST: the ones incremental APPEND and SUBTRACT may change.
LIST_TOPIC_KEYS = frozenset({"cleanup.policy"})
APPEND, SUBTRACT = 2, 3   # AlterConfigOp.OpType ids after SET (0) and DELETE (1)


def altered_list(name: str, current: str | None, op: int, value: str) -> str:
    """``current`` (a comma-separated LIST value) after an incremental APPEND or SUBTRACT of the
    comma-separated ``value``, as Kafka's ConfigurationControlManager: APPEND adds the parts not
    there yet, at the end; SUBTRACT removes them. Refused for a key that is not a LIST."""
    if name not in LIST_TOPIC_KEYS:
        raise InvalidConfigError(f"Can't {'APPEND' if op == APPEND else 'SUBTRACT'} to key {name} because its "
                                 "type is not LIST.", config=name)
    parts = [p.strip() for p in (current or "").split(",") if p.strip()]
    for part in (p.strip() for p in value.split(",")):
        if op == APPEND and part and part not in parts:
            parts.append(part)
        elif op == SUBTRACT and part in parts:
            parts.remove(part)
    return ",".join(parts)


TOPIC_KEYS = [
    ConfigKey("compression.type", str, "producer",
              "codec of stored batches: producer keeps the producer's; zstd, lz4 or uncompressed recompress "
              "on append when a batch differs", one_of("producer", "zstd", "lz4", "uncompressed"),
              "compression.type"),
    ConfigKey("message.timestamp.before.max.ms", int, LONG_MAX,
              "with CreateTime: refuse a batch whose timestamp is more than this far in the past",
              at_least(0), "log.message.timestamp.before.max.ms"),
    ConfigKey("message.timestamp.after.max.ms", int, LONG_MAX,
              "with CreateTime: refuse a batch whose timestamp is more than this far in the future",
              at_least(0), "log.message.timestamp.after.max.ms"),
    ConfigKey("cleanup.policy", str, "delete", "delete old segments, compact by key, or both",
              _cleanup_policy, "log.cleanup.policy"),
    ConfigKey("retention.ms", int, 604_800_000,
              "with cleanup.policy delete: remove a segment once its newest record is this old; -1 forever",
              at_least(-1), "log.retention.ms"),
    ConfigKey("retention.bytes", int, -1,
              "with cleanup.policy delete: remove old segments while the partition is larger; negative unbounded",
              None, "log.retention.bytes"),
    ConfigKey("segment.bytes", int, 1_073_741_824, "roll to a new segment file at this size",
              between(100, INT_MAX), "log.segment.bytes"),
    ConfigKey("segment.ms", int, 604_800_000, "roll to a new segment after this long even if not full",
              at_least(1), "log.roll.ms"),
    ConfigKey("index.interval.bytes", int, 4096, "bytes of log between offset/time index entries",
              between(0, INT_MAX), "log.index.interval.bytes"),
    ConfigKey("flush.messages", int, LONG_MAX, "fsync after this many records (replication protects data)",
              at_least(1), "log.flush.interval.messages"),
    ConfigKey("flush.ms", int, LONG_MAX, "fsync after this long since the last fsync",
              at_least(0), "log.flush.interval.ms"),
    ConfigKey("max.message.bytes", int, 1_048_588, "largest record batch the partition accepts",
              between(0, INT_MAX), "message.max.bytes"),
    ConfigKey("message.timestamp.type", str, "CreateTime",
              "CreateTime keeps the producer's timestamps, LogAppendTime stamps the broker's clock",
              one_of("CreateTime", "LogAppendTime"), "log.message.timestamp.type"),
    ConfigKey("min.insync.replicas", int, 1, "replicas that must hold a batch before acks=all succeeds",
              between(1, INT_MAX), "min.insync.replicas"),
    ConfigKey("unclean.leader.election.enable", bool, False,
              "allow an out-of-sync replica to become leader (may lose data)",
              None, "unclean.leader.election.enable"),
    ConfigKey("delete.retention.ms", int, 86_400_000,
              "compaction keeps a tombstone (and a removable transaction marker) at least this long after the clean that first kept it (KIP-534)",
              at_least(0), "log.cleaner.delete.retention.ms"),
    ConfigKey("min.cleanable.dirty.ratio", float, 0.5,
              "compact once this share of the cleanable bytes was written since the last clean",
              between(0.0, 1.0), "log.cleaner.min.cleanable.ratio"),
    ConfigKey("min.compaction.lag.ms", int, 0,
              "a segment whose newest record is younger than this is not compacted yet",
              at_least(0), "log.cleaner.min.compaction.lag.ms"),
    ConfigKey("max.compaction.lag.ms", int, LONG_MAX,
              "compact regardless of the dirty ratio once the oldest dirty record is this old",
              at_least(1), "log.cleaner.max.compaction.lag.ms"),
    ConfigKey("file.delete.delay.ms", int, 60_000,
              "accepted for compatibility and not used: a removed segment's files are deleted at once "
              "(reads copy their bytes under the partition lock, so none can hold a deleted file)",
              at_least(0), "log.segment.delete.delay.ms"),
]
_TIERED = "Riverlog has no tiered (remote) storage; every segment stays on the broker's disks (use retention.ms/retention.bytes)"
_NO_GZIP_SNAPPY = ("a batch body is Arrow IPC, whose buffers compress with lz4 or zstd only; use zstd "
                   "(gzip's ratio or better) or lz4 (snappy's speed)")
# Every other topic config Kafka's TopicConfig has that a client can set, with why it is refused here.
REFUSED_TOPIC_KEYS = {
    "compression.gzip.level": _NO_GZIP_SNAPPY,
    "compression.lz4.level": "the broker compresses at the codec's default level; set compression.type only",
    "compression.zstd.level": "the broker compresses at the codec's default level; set compression.type only",
    "remote.storage.enable": _TIERED,
    "local.retention.ms": _TIERED,
    "local.retention.bytes": _TIERED,
    "remote.log.copy.disable": _TIERED,
    "remote.log.delete.on.disable": _TIERED,
    "leader.replication.throttled.replicas": "Riverlog has no replication quotas; followers fetch at full speed "
                                              "(bounded by replica.fetch.max.bytes)",
    "follower.replication.throttled.replicas": "Riverlog has no replication quotas; followers fetch at full speed "
                                                "(bounded by replica.fetch.max.bytes)",
    "message.format.version": "Riverlog stores one record format (Arrow bodies in v2 batch headers); "
                              "there is no older format to choose (removed in Kafka 4.0 too)",
    "message.downconversion.enable": "Riverlog stores one record format and never down-converts for old "
                                     "consumers (removed in Kafka 4.0 too)",
    "message.timestamp.difference.max.ms": "deprecated by Kafka (KIP-937); use message.timestamp.before.max.ms "
                                           "and message.timestamp.after.max.ms",
    "preallocate": "segment files grow as they are written; Riverlog does not preallocate them",
    "segment.index.bytes": "offset and time indexes are kept in memory and written whole on flush; "
                           "their size follows index.interval.bytes",
    "segment.jitter.ms": "segments roll exactly at segment.ms or segment.bytes; there is no jitter",
}
def _compaction_lags(values: Mapping) -> InvalidConfigError | None:
    low, high = values["min.compaction.lag.ms"], values["max.compaction.lag.ms"]
    if low > high:   # LogConfig.validateValues
        return InvalidConfigError(f"conflict topic config setting min.compaction.lag.ms ({low}) > "
                                  f"max.compaction.lag.ms ({high})", config="min.compaction.lag.ms")
    return None


TOPIC_CONFIG = ConfigDef("topic", TOPIC_KEYS, REFUSED_TOPIC_KEYS, _compaction_lags)


def _one_log_dir(value: str) -> str | None:
    """Kafka's log.dirs is a comma-separated list (JBOD); here a broker has one data directory, and
    a list taken as one path would put every log in a directory named after the whole list."""
    if "," in value:
        return ("must be one directory: Riverlog keeps all partitions of a broker in one data directory "
                "(no JBOD); give one path, or run one broker per disk")
    return None


BROKER_KEYS = [
    ConfigKey("node.id", int, 0, "this node's id in the cluster", between(0, INT_MAX)),
    ConfigKey("log.dirs", str, "./riverlog-data", "directory holding partition logs and metadata",
              _one_log_dir),
    ConfigKey("listeners", str, "127.0.0.1:9092",
              "NAME://host:port,... the node listens on (port 0 picks one); a bare host:port is the client "
              "listener (PLAINTEXT). The inter-broker listener defaults to a free port on the client's host"),
    ConfigKey("advertised.listeners", str, "", "NAME://host:port,... other parties are told to use "
              "(default: listeners); a bare host:port is the client listener"),
    ConfigKey("inter.broker.listener.name", str, "REPLICATION",
              "the listener other brokers use (replica fetches, leader-epoch queries, transaction markers); "
              "never the client listener"),
    ConfigKey("controller.listener.names", str, "CONTROLLER",
              "the listener of this node's controller.quorum.voters entry (Raft, controller requests, "
              "metadata fetches); never the client listener"),
    ConfigKey("num.partitions", int, 1, "partitions of a topic created without a count", between(1, INT_MAX)),
    ConfigKey("default.replication.factor", int, 1, "replicas of a topic created without a factor",
              between(1, INT_MAX)),
    ConfigKey("auto.create.topics.enable", bool, True,
              "create an unknown topic (num.partitions, default.replication.factor) when a producer or "
              "consumer asks for its metadata, as Kafka; false: such clients get UnknownTopicOrPartition"),
    ConfigKey("num.io.threads", int, 16,
              "threads that do requests' work; a waiting request (long-poll fetch, acks=all produce, idle "
              "stream) holds none", at_least(2)),
    ConfigKey("fetch.max.wait.ms", int, 30_000,
              "longest a fetch long-polls on this broker: a client's larger fetch.max.wait.ms is cut to it",
              at_least(0)),
    ConfigKey("socket.request.max.bytes", int, 104_857_600, "largest request the broker accepts",
              between(1024, INT_MAX)),
    ConfigKey("fetch.max.bytes", int, 57_671_680, "largest fetch response the broker builds", between(1024, INT_MAX)),
    ConfigKey("log.flush.scheduler.interval.ms", int, 1000, "how often flush.ms is checked", at_least(1)),
    ConfigKey("log.retention.check.interval.ms", int, 300_000,
              "how often old segments are removed (retention.ms, retention.bytes, log start offset)",
              at_least(1)),
    ConfigKey("log.retention.hours", int, 168,
              "default retention.ms in hours, used when neither log.retention.ms nor log.retention.minutes is set",
              between(-INT_MAX - 1, INT_MAX)),
    ConfigKey("log.retention.minutes", int, 10_080,
              "default retention.ms in minutes, used when log.retention.ms is not set",
              between(-INT_MAX - 1, INT_MAX)),
    ConfigKey("log.roll.hours", int, 168, "default segment.ms in hours, used when log.roll.ms is not set",
              between(1, INT_MAX)),
    ConfigKey("log.cleaner.enable", bool, True, "run the log cleaner that compacts cleanup.policy=compact topics"),
    ConfigKey("log.cleaner.backoff.ms", int, 15_000, "how long the cleaner sleeps when no log needs cleaning",
              at_least(0)),
    ConfigKey("delete.topic.enable", bool, True, "allow DeleteTopics"),
    # --- cluster (KRaft names)
    ConfigKey("process.roles", str, "broker,controller",
              "broker, controller or both; a single node with both is a whole cluster",
              one_of("broker", "controller", "broker,controller", "controller,broker")),
    ConfigKey("controller.quorum.voters", str, "",
              "id@host:port of every controller (empty: this node alone is the quorum)"),
    ConfigKey("controller.quorum.election.timeout.ms", int, 1000,
              "a follower that hears no leader for this long (randomised up to 2x) starts an election",
              between(10, INT_MAX)),
    ConfigKey("controller.quorum.fetch.timeout.ms", int, 2000, "metadata long-poll wait", between(10, INT_MAX)),
    ConfigKey("broker.heartbeat.interval.ms", int, 250, "how often a broker heartbeats the controller",
              between(10, INT_MAX)),
    ConfigKey("broker.session.timeout.ms", int, 1500,
              "a broker silent this long is fenced and loses leaderships (Kafka: 9000; shorter for fast failover)",
              between(10, INT_MAX)),
    ConfigKey("replica.lag.time.max.ms", int, 10_000,
              "a follower not caught up within this long leaves the ISR (Kafka: 30000)", at_least(10)),
    ConfigKey("replica.fetch.wait.max.ms", int, 200, "follower fetch long-poll wait", between(0, INT_MAX)),
    ConfigKey("replica.fetch.max.bytes", int, 1_048_576, "bytes per partition in a follower fetch",
              between(1024, INT_MAX)),
    ConfigKey("replica.fetch.backoff.ms", int, 100, "pause after a failed follower fetch", between(0, INT_MAX)),
    ConfigKey("auto.leader.rebalance.enable", bool, True,
              "move leadership back to the preferred (first) replica when it is in sync"),
    ConfigKey("leader.imbalance.check.interval.seconds", int, 10,
              "how often preferred leaders are restored (Kafka: 300)", at_least(1)),
    ConfigKey("controlled.shutdown.enable", bool, True,
              "move leadership away before a broker stops"),
    ConfigKey("controlled.shutdown.timeout.ms", int, 10_000, "how long a stopping broker waits for it",
              at_least(0)),
    ConfigKey("metadata.max.snapshot.records", int, 10_000,
              "snapshot the metadata image after this many new records", at_least(1)),
    # --- consumer groups
    ConfigKey("offsets.topic.num.partitions", int, 10,
              "partitions of __consumer_offsets, i.e. how many brokers can share group coordination "
              "(Kafka: 50; fewer suits small clusters; fixed once the topic exists)", between(1, 10_000)),
    ConfigKey("offsets.topic.replication.factor", int, 3,
              "replicas of __consumer_offsets, capped by the registered brokers (down ones included) when it is created", between(1, SHORT_MAX)),
    ConfigKey("offsets.topic.segment.bytes", int, 104_857_600, "segment size of __consumer_offsets",
              between(1024, INT_MAX)),
    ConfigKey("offsets.commit.timeout.ms", int, 5000,
              "how long a group write waits for the replicas of __consumer_offsets", between(1, INT_MAX)),
    ConfigKey("group.min.session.timeout.ms", int, 6000, "shortest session.timeout.ms a member may ask for",
              between(1, INT_MAX)),
    ConfigKey("group.max.session.timeout.ms", int, 1_800_000, "longest session.timeout.ms a member may ask for",
              between(1, INT_MAX)),
    ConfigKey("transaction.state.log.num.partitions", int, 10,
              "partitions of __transaction_state (Kafka: 50); fixed once the topic exists", between(1, 10_000)),
    ConfigKey("transaction.state.log.replication.factor", int, 3,
              "replicas of __transaction_state, capped by the registered brokers (down ones included) when it is created", between(1, SHORT_MAX)),
    ConfigKey("transaction.state.log.segment.bytes", int, 104_857_600, "segment size of __transaction_state",
              between(1024, INT_MAX)),
    ConfigKey("transaction.state.log.min.isr", int, 2,
              "min.insync.replicas of __transaction_state (capped by its replication factor): a coordinator "
              "decision is acknowledged once this many replicas hold it", between(1, INT_MAX)),
    ConfigKey("transaction.max.timeout.ms", int, 900_000, "longest transaction.timeout.ms a producer may ask for",
              between(1, INT_MAX)),
    ConfigKey("transactional.id.expiration.ms", int, 604_800_000,
              "a transactional.id with no transaction for this long is forgotten by its coordinator",
              between(1, INT_MAX)),
    ConfigKey("transaction.remove.expired.transaction.cleanup.interval.ms", int, 3_600_000,
              "how often idle transactional ids are looked for", between(1, INT_MAX)),
    ConfigKey("producer.id.expiration.ms", int, 86_400_000,
              "a partition forgets an idempotent producer that wrote nothing for this long (and has no "
              "open transaction)", between(1, INT_MAX)),
    ConfigKey("producer.id.expiration.check.interval.ms", int, 600_000,
              "how often idle producers are looked for", between(1, INT_MAX)),
    ConfigKey("group.consumer.heartbeat.interval.ms", int, 3000,
              "how often members heartbeat when nothing is moving (they are told to)", between(10, INT_MAX)),
] + [ConfigKey(k.broker_default, k.type, k.default, k.doc, k.validator)
     for k in TOPIC_KEYS if k.broker_default not in ("min.insync.replicas", "unclean.leader.election.enable")] \
  + [ConfigKey("min.insync.replicas", int, 1, "default replicas that must hold a batch for acks=all",
               between(1, INT_MAX)),
     ConfigKey("unclean.leader.election.enable", bool, False, "default for topics")]
BROKER_CONFIG = ConfigDef("broker", BROKER_KEYS)


# The broker keys behind a topic key's default, most specific first, where Kafka has more than one
# (``KafkaConfig.logRetentionTimeMillis``, ``logRollTimeMillis``); the others have their broker_default.
BROKER_SYNONYMS = {"retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
                   "segment.ms": ("log.roll.ms", "log.roll.hours")}


def topic_defaults(broker_config: Config) -> dict:
    """Topic-level defaults taken from the broker's log.* keys.

    Time keys follow Kafka's ``KafkaConfig.logRetentionTimeMillis`` and ``logRollTimeMillis``:
    ``log.retention.ms`` wins over ``log.retention.minutes``, which wins over ``log.retention.hours``
    (a negative result keeps records forever, -1), and ``log.roll.ms`` over ``log.roll.hours``; only
    keys the broker's configuration sets count, so a Kafka ``server.properties`` with
    ``log.retention.hours=24`` keeps one day, not the 7-day default."""
    defaults = {k.name: broker_config[k.broker_default] for k in TOPIC_KEYS}
    given = broker_config.overrides
    if "log.retention.ms" not in given:
        if "log.retention.minutes" in given:
            defaults["retention.ms"] = max(-1, broker_config["log.retention.minutes"] * 60_000)
        elif "log.retention.hours" in given:
            defaults["retention.ms"] = max(-1, broker_config["log.retention.hours"] * 3_600_000)
    if "log.roll.ms" not in given and "log.roll.hours" in given:
        defaults["segment.ms"] = broker_config["log.roll.hours"] * 3_600_000
    return defaults


def read_properties(path: str) -> dict[str, str]:
    """A Java-style .properties file (key=value, # comments) as a dict."""
    values = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line or line[0] in "#!":
                continue
            key, sep, value = line.partition("=")
            if not sep:
                key, _, value = line.partition(":")
            values[key.strip()] = value.strip()
    return values
