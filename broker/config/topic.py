"""Topic configuration: Kafka's topic keys (``TopicConfig``/``LogConfig``), the ones refused with
why, the rule across keys, and incremental APPEND/SUBTRACT of LIST values.

Kept apart from the broker's keys because topics are configured on their own (CreateTopics,
AlterConfigs) and each topic key names the broker key that supplies its default.
"""
from __future__ import annotations

from typing import Mapping

from broker.config.definition import INT_MAX, LONG_MAX, Config, ConfigDef, ConfigKey, at_least, between, one_of
from broker.errors import InvalidConfigError, InvalidRequestError


def _cleanup_policy(value: str) -> str | None:
    """Kafka 4.2's rule: a list of delete and compact, or empty, which means infinite retention
    (no segment deleted by time or size, none compacted)."""
    parts = [p.strip() for p in value.split(",")]
    if parts == [""]:
        return None
    if any(p not in ("delete", "compact") for p in parts):
        return "must be delete, compact, compact,delete, or empty (infinite retention)"
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


def altered_configs(current: Mapping[str, str], ops: list, defaults: Mapping, incremental: bool) -> dict[str, str]:
    """A topic's overrides after an AlterConfigs (``incremental=False``: ``ops`` replace them all)
    or IncrementalAlterConfigs request, each op ``(op, name, value)``: SET, DELETE, APPEND or
    SUBTRACT (a LIST key unset here starts from ``defaults``). Applied by the controller to the
    overrides it holds, as Kafka's ConfigurationControlManager, so two alters never undo each other."""
    overrides = dict(current) if incremental else {}
    for op, name, value in ops:
        if op == 0:
            overrides[name] = value
        elif op == 1:
            overrides.pop(name, None)
        elif op in (APPEND, SUBTRACT) and incremental:
            base = overrides.get(name)
            if base is None and name in defaults:
                base = _text(defaults[name])
            overrides[name] = altered_list(name, base, op, value)
        else:
            raise InvalidRequestError(
                f"config operation {op} for '{name}' is not one of SET (0), DELETE (1), APPEND (2), SUBTRACT (3)"
                + ("" if incremental else "; alter_configs replaces; use incremental_alter_configs"))
    return overrides


def _text(value) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


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
    ConfigKey("message.timestamp.difference.max.ms", int, LONG_MAX,
              "deprecated (KIP-937): the bound of message.timestamp.before.max.ms and of "
              "message.timestamp.after.max.ms wherever that one is left at its default",
              at_least(0), "log.message.timestamp.difference.max.ms"),
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


def loaded_topic_config(values: Mapping, defaults: Mapping | None) -> tuple[Config, list[InvalidConfigError]]:
    """A topic's config as a broker reads it from the metadata log: never refused, with what it
    could not use. The controller checked it against its own defaults and version; this broker's
    defaults can break the rule across keys (``min.compaction.lag.ms`` over this broker's
    ``log.cleaner.max.compaction.lag.ms``), which Kafka does not check on load, and a key or value
    this version cannot read is left at its default. Refusing instead would leave the topic's
    partitions without a config, and a broker must keep serving what it hosts."""
    values, problems = dict(values or {}), []
    while True:
        try:
            return TOPIC_CONFIG.parse(values, defaults=defaults, check=False), problems
        except InvalidConfigError as e:
            name = e.details.get("config")
            if name not in values:
                raise
            problems.append(e)
            del values[name]

_DIFFERENCE = "message.timestamp.difference.max.ms"


def timestamp_bounds(config: Mapping) -> tuple[tuple[str, int], tuple[str, int]]:
    """The (key, value) that bounds a CreateTime record's timestamp in the past, then in the future.

    Kafka's ``LogConfig.getMessageTimestampBeforeMaxMs``/``AfterMaxMs`` while the deprecated
    ``message.timestamp.difference.max.ms`` is still honoured: a before/after bound left at its
    default (Long.MAX_VALUE) takes the difference instead, so a topic configured for Kafka 3.5 or
    earlier keeps refusing what it refused there."""
    bounds = []
    for name in ("message.timestamp.before.max.ms", "message.timestamp.after.max.ms"):
        inherited = config[name] == LONG_MAX and config[_DIFFERENCE] != LONG_MAX
        bounds.append((_DIFFERENCE, config[_DIFFERENCE]) if inherited else (name, config[name]))
    return bounds[0], bounds[1]
