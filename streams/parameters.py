"""The parameter objects of Kafka Streams' DSL: ``Consumed``, ``Produced``, ``Grouped``,
``Materialized``, ``Named``, ``Repartitioned``, ``Branched``. Immutable; each ``with...`` returns a
copy. Factory names end in ``_`` where Kafka's are Python keywords (``with_``, ``as_``)."""
from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

from streams.errors import TopologyError

_LEGAL_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def check_name(name: str | None, what: str) -> str | None:
    """Kafka's rule for processor, store and topic names (they become topic names)."""
    if name is not None and not _LEGAL_NAME.fullmatch(name):
        raise TopologyError(f"{what} {name!r} is not a legal name: use 1-249 of [a-zA-Z0-9._-]")
    if name in (".", ".."):
        raise TopologyError(f'{what} {name!r} is not a legal name: a name cannot be "." or ".." (Kafka\'s Named)')
    return name


def _serde(serde, what: str):
    if serde is None:
        return None
    from streams.serdes import serde_of
    try:
        return serde_of(serde)
    except Exception as e:
        raise TopologyError(f"{what}: {e}") from e



# ------------------------------------------------------------------ timestamp extractors
# Kafka's org.apache.kafka.streams.processor extractors. Each is a callable (record, partition_time)
# -> ms, as any extractor given to Consumed.withTimestampExtractor; a negative result drops the
# record (RecordQueue). ``default.timestamp.extractor`` names one (FailOnInvalidTimestamp by default).

_log = logging.getLogger("streams.timestamps")


class TimestampExtractor:
    """An extractor class of one's own implements :meth:`extract`. ``uses_partition_time`` False
    says it never reads ``partition_time`` (it is then given -1): a sub-topology with no store
    need not keep the partition time for it and stays stateless on Spark (:func:`uses_partition_time`)."""
    uses_partition_time = True

    def __call__(self, record, partition_time: int) -> int:
        return self.extract(record, partition_time)

    def extract(self, record, partition_time: int) -> int:
        raise NotImplementedError


class ExtractRecordMetadataTimestamp(TimestampExtractor):
    """The record's own (broker) timestamp; a negative one goes to :meth:`on_invalid_timestamp`."""
    uses_partition_time = False     # False: the source need not keep the partition time for it

    def extract(self, record, partition_time: int) -> int:
        ts = record.timestamp
        return ts if ts >= 0 else self.on_invalid_timestamp(record, ts, partition_time)

    def on_invalid_timestamp(self, record, record_timestamp: int, partition_time: int) -> int:
        raise NotImplementedError


class FailOnInvalidTimestamp(ExtractRecordMetadataTimestamp):
    """Kafka's default: a negative record timestamp fails the task."""
    def on_invalid_timestamp(self, record, record_timestamp, partition_time):
        from streams.errors import StreamsError
        message = invalid_timestamp_message(str(record))
        _log.error(message)
        raise StreamsError(message)


def invalid_timestamp_message(record: str) -> str:
    return (f"Input record {record} has invalid (negative) timestamp. Possibly because a pre-0.10 producer client "
            "was used to write this record to Kafka without embedding a timestamp, or because the input topic was "
            "created before upgrading the Kafka cluster to 0.10+. Use a different TimestampExtractor to process "
            "this data.")


class LogAndSkipOnInvalidTimestamp(ExtractRecordMetadataTimestamp):
    """A negative record timestamp is logged and the record dropped."""
    def on_invalid_timestamp(self, record, record_timestamp, partition_time):
        _log.warning("Input record %s will be dropped because it has an invalid (negative) timestamp.", record)
        return record_timestamp


class UsePartitionTimeOnInvalidTimestamp(ExtractRecordMetadataTimestamp):
    """A negative record timestamp is replaced by the partition time (failing before there is one)."""
    uses_partition_time = True

    def on_invalid_timestamp(self, record, record_timestamp, partition_time):
        if partition_time < 0:
            from streams.errors import StreamsError
            raise StreamsError(f"Could not infer new timestamp for input record {record} because partition time "
                               "is unknown.")
        return partition_time


class WallclockTimestampExtractor(TimestampExtractor):
    """The wall-clock time of processing (a replay gives other timestamps)."""
    uses_partition_time = False

    def extract(self, record, partition_time):
        return int(time.time() * 1000)


TIMESTAMP_EXTRACTORS = (FailOnInvalidTimestamp, LogAndSkipOnInvalidTimestamp, UsePartitionTimeOnInvalidTimestamp,
                        WallclockTimestampExtractor)


def uses_partition_time(extractor) -> bool:
    """Whether ``extractor`` reads the partition time, so its source must keep it across batches
    and restarts (Kafka commits it with the offsets). Kafka's extractors say so; a callable is
    taken to read it (its body is not inspected) unless it carries ``uses_partition_time = False``
    (``fn.uses_partition_time = False``), and is then given -1."""
    return bool(getattr(extractor, "uses_partition_time", True))


def timestamp_extractor(extractor, what: str = "default.timestamp.extractor"):
    """An extractor from a callable, an extractor class, or Kafka's class name (simple or
    ``org.apache.kafka.streams.processor.X``); None: the default ``FailOnInvalidTimestamp``."""
    if extractor is None:
        return FailOnInvalidTimestamp()
    if isinstance(extractor, type) and issubclass(extractor, TimestampExtractor):
        return extractor()
    if callable(extractor):
        return extractor
    from streams.errors import kafka_class
    return kafka_class({what: extractor}, what, TIMESTAMP_EXTRACTORS, "org.apache.kafka.streams.processor",
                       FailOnInvalidTimestamp)

@dataclass(frozen=True)
class Named:
    name: str | None = None

    @staticmethod
    def as_(name: str) -> "Named":
        """Kafka's ``Named.as``: null is refused (leave the argument out for a generated name)."""
        if name is None:
            raise TopologyError("name can't be null")
        if not isinstance(name, str):
            raise TopologyError(f"Named: expected a name (str), got {type(name).__name__}")
        return Named(check_name(name, "Named"))


@dataclass(frozen=True)
class Consumed:
    key_serde: Any = None
    value_serde: Any = None
    timestamp_extractor: Callable | None = None   # (record, partition_time) -> ms; default: the record's timestamp
    offset_reset: str | None = None                # "earliest" | "latest" | "none" | None (auto.offset.reset)
    name: str | None = None

    @staticmethod
    def with_(key_serde=None, value_serde=None) -> "Consumed":
        return Consumed(_serde(key_serde, "Consumed key serde"), _serde(value_serde, "Consumed value serde"))

    @staticmethod
    def as_(name: str) -> "Consumed":
        return Consumed(name=check_name(name, "Consumed"))

    def withKeySerde(self, serde) -> "Consumed":
        return replace(self, key_serde=_serde(serde, "Consumed key serde"))

    def withValueSerde(self, serde) -> "Consumed":
        return replace(self, value_serde=_serde(serde, "Consumed value serde"))

    def withTimestampExtractor(self, extractor) -> "Consumed":
        """A callable ``(record, partition_time) -> ms`` or one of Kafka's extractors (an instance,
        class or class name: ``LogAndSkipOnInvalidTimestamp``, ...)."""
        try:
            return replace(self, timestamp_extractor=timestamp_extractor(extractor, "timestamp extractor"))
        except Exception as e:
            raise TopologyError(f"Consumed.withTimestampExtractor: {e}") from e

    def withOffsetResetPolicy(self, policy: str) -> "Consumed":
        """``earliest``, ``latest`` or Kafka 4.0's ``none`` (``AutoOffsetReset.none()``: a partition
        of this source without a valid committed offset fails the start)."""
        policy = policy.lower()
        if policy not in ("earliest", "latest", "none"):
            raise TopologyError(f"offset reset policy {policy!r}: expected 'earliest', 'latest' or 'none'")
        return replace(self, offset_reset=policy)

    def withName(self, name: str) -> "Consumed":
        return replace(self, name=check_name(name, "Consumed"))


@dataclass(frozen=True)
class Produced:
    key_serde: Any = None
    value_serde: Any = None
    name: str | None = None
    partitioner: Callable | None = None     # streams.stream_partitioner: (topic, key, value, num_partitions)

    @staticmethod
    def with_(key_serde=None, value_serde=None, partitioner=None) -> "Produced":
        return Produced(_serde(key_serde, "Produced key serde"), _serde(value_serde, "Produced value serde")
                        ).withStreamPartitioner(partitioner)

    @staticmethod
    def streamPartitioner(partitioner) -> "Produced":
        return Produced().withStreamPartitioner(partitioner)

    def withStreamPartitioner(self, partitioner) -> "Produced":
        from streams.stream_partitioner import check_partitioner
        return replace(self, partitioner=None if partitioner is None else check_partitioner(partitioner, "Produced"))

    @staticmethod
    def as_(name: str) -> "Produced":
        return Produced(name=check_name(name, "Produced"))

    @staticmethod
    def keySerde(serde) -> "Produced":
        """Kafka's ``Produced.keySerde``: only the key serde (the value's is the stream's)."""
        return Produced(_serde(serde, "Produced key serde"))

    @staticmethod
    def valueSerde(serde) -> "Produced":
        """Kafka's ``Produced.valueSerde``: only the value serde (the key's is the stream's)."""
        return Produced(value_serde=_serde(serde, "Produced value serde"))

    def withKeySerde(self, serde) -> "Produced":
        return replace(self, key_serde=_serde(serde, "Produced key serde"))

    def withValueSerde(self, serde) -> "Produced":
        return replace(self, value_serde=_serde(serde, "Produced value serde"))

    def withName(self, name: str) -> "Produced":
        return replace(self, name=check_name(name, "Produced"))


@dataclass(frozen=True)
class Grouped:
    name: str | None = None        # names the repartition topic: <application.id>-<name>-repartition
    key_serde: Any = None
    value_serde: Any = None

    @staticmethod
    def as_(name: str) -> "Grouped":
        return Grouped(name=check_name(name, "Grouped"))

    @staticmethod
    def with_(key_serde=None, value_serde=None) -> "Grouped":
        return Grouped(None, _serde(key_serde, "Grouped key serde"), _serde(value_serde, "Grouped value serde"))

    def withKeySerde(self, serde) -> "Grouped":
        return replace(self, key_serde=_serde(serde, "Grouped key serde"))

    def withValueSerde(self, serde) -> "Grouped":
        return replace(self, value_serde=_serde(serde, "Grouped value serde"))

    def withName(self, name: str) -> "Grouped":
        return replace(self, name=check_name(name, "Grouped"))


@dataclass(frozen=True)
class Repartitioned:
    name: str | None = None
    key_serde: Any = None
    value_serde: Any = None
    partitions: int | None = None
    partitioner: Callable | None = None

    @staticmethod
    def streamPartitioner(partitioner) -> "Repartitioned":
        return Repartitioned().withStreamPartitioner(partitioner)

    def withStreamPartitioner(self, partitioner) -> "Repartitioned":
        from streams.stream_partitioner import check_partitioner
        return replace(self, partitioner=check_partitioner(partitioner, "Repartitioned"))

    @staticmethod
    def as_(name: str) -> "Repartitioned":
        return Repartitioned(name=check_name(name, "Repartitioned"))

    @staticmethod
    def with_(key_serde=None, value_serde=None) -> "Repartitioned":
        return Repartitioned(None, _serde(key_serde, "Repartitioned key serde"),
                             _serde(value_serde, "Repartitioned value serde"))

    @staticmethod
    def numberOfPartitions(n: int) -> "Repartitioned":
        return Repartitioned().withNumberOfPartitions(n)

    def withNumberOfPartitions(self, n: int) -> "Repartitioned":
        if not isinstance(n, int) or n < 1:
            raise TopologyError(f"Repartitioned number of partitions must be a positive int, got {n!r}")
        return replace(self, partitions=n)

    def withName(self, name: str) -> "Repartitioned":
        return replace(self, name=check_name(name, "Repartitioned"))

    def withKeySerde(self, serde) -> "Repartitioned":
        return replace(self, key_serde=_serde(serde, "Repartitioned key serde"))

    def withValueSerde(self, serde) -> "Repartitioned":
        return replace(self, value_serde=_serde(serde, "Repartitioned value serde"))


@dataclass(frozen=True)
class Materialized:
    """Names a state store (and so its changelog ``<application.id>-<store>-changelog``) and gives its
    serdes; ``retention`` (ms) for window and session stores; ``log_config`` the changelog topic's
    configs (Kafka's ``withLoggingEnabled(config)``), as sorted (name, value) pairs."""
    store_name: str | None = None
    key_serde: Any = None
    value_serde: Any = None
    retention: int | None = None
    logging: bool = True
    log_config: tuple = ()
    history_retention: int | None = None    # a versioned table's history (KIP-914), else None
    caching: bool = True
    supplier_kind: str | None = None        # "keyValue", "window" or "session" when given a Stores supplier

    @staticmethod
    def as_(store_name) -> "Materialized":
        """A store name, or a store supplier: ``Stores.persistentVersionedKeyValueStore(name, history)``
        makes a versioned table."""
        history = getattr(store_name, "historyRetentionMs", None)
        if history is not None:
            return Materialized(store_name=check_name(store_name.name, "Materialized store name"),
                                history_retention=history)
        kind = getattr(store_name, "store_kind", None)
        if kind is not None:    # streams.store_suppliers: the store's name, and a window or session retention
            return Materialized(store_name=check_name(store_name.name, "Materialized store name"),
                                retention=getattr(store_name, "retentionPeriod", None), supplier_kind=kind)
        return Materialized(store_name=check_name(store_name, "Materialized store name"))

    @staticmethod
    def with_(key_serde=None, value_serde=None) -> "Materialized":
        return Materialized(None, _serde(key_serde, "Materialized key serde"),
                            _serde(value_serde, "Materialized value serde"))

    def withKeySerde(self, serde) -> "Materialized":
        return replace(self, key_serde=_serde(serde, "Materialized key serde"))

    def withValueSerde(self, serde) -> "Materialized":
        return replace(self, value_serde=_serde(serde, "Materialized value serde"))

    def withRetention(self, retention) -> "Materialized":
        from streams.windows import duration_ms
        return replace(self, retention=duration_ms(retention, "Materialized retention"))

    def withCachingEnabled(self) -> "Materialized":
        return replace(self, caching=True)

    def withCachingDisabled(self) -> "Materialized":
        """Forward every update of this store at once, as Kafka does without its record cache."""
        return replace(self, caching=False)

    def withLoggingDisabled(self) -> "Materialized":
        raise TopologyError("withLoggingDisabled: Riverlog stores are always logged, because the changelog "
                            "is what lets an application restart from the broker alone")

    def withLoggingEnabled(self, config: dict | None = None) -> "Materialized":
        """Topic configs for the store's changelog, applied when the application creates it (over
        Riverlog's ``cleanup.policy=compact``; an existing changelog keeps its configs)."""
        items = dict(config or {})
        for k, v in items.items():
            if not isinstance(k, str) or not k:
                raise TopologyError(f"withLoggingEnabled: a topic config name must be a non-empty string, got {k!r}")
            if k == "cleanup.policy" and "compact" not in str(v).split(","):
                raise TopologyError(f"withLoggingEnabled: cleanup.policy={v!r} would let the broker delete state "
                                    "the application restarts from; use compact or compact,delete")
        return replace(self, logging=True, log_config=tuple(sorted((k, str(v)) for k, v in items.items())))


def _branch_name(name, allow_none: bool = False) -> str | None:
    """Kafka's ``Branched`` rejects only null: the name is a processor-name suffix, not a topic."""
    if name is None and allow_none:
        return None
    if name is None:
        raise TopologyError("name cannot be null")
    if not isinstance(name, str):
        raise TopologyError(f"Branched: expected a name (str), got {type(name).__name__}")
    return name


@dataclass(frozen=True)
class Branched:
    """Kafka's ``Branched``: a branch's name (suffix to the split's name) and what to do with it."""
    name: str | None = None
    chain: Callable | None = None     # KStream -> KStream | None, applied to the branch; kept if not None
    consumer: Callable | None = None  # KStream -> None, applied to the branch; the branch is not returned

    @staticmethod
    def as_(name: str) -> "Branched":
        return Branched(name=_branch_name(name))

    @staticmethod
    def withFunction(chain: Callable, name: str | None = None) -> "Branched":
        if not callable(chain):
            raise TopologyError("Branched.withFunction: chain must be a callable taking the branch's KStream")
        return Branched(_branch_name(name, allow_none=True), chain)

    @staticmethod
    def withConsumer(chain: Callable, name: str | None = None) -> "Branched":
        """Kafka's ``Branched.withConsumer``: ``chain`` gets the branch's stream (to end it with
        ``to``, ``foreach``, ...); the branch is then not in the map ``defaultBranch()`` returns."""
        if not callable(chain):
            raise TopologyError("Branched.withConsumer: chain must be a callable taking the branch's KStream")
        return Branched(_branch_name(name, allow_none=True), None, chain)

    def withName(self, name: str) -> "Branched":
        """Kafka's ``Branched.withName``: the same chain or consumer under another name."""
        return replace(self, name=_branch_name(name))


def split_materialized(named, materialized):
    """Kafka's overloads ``count(Materialized)``, ``filter(predicate, Materialized)``, …: a
    Materialized given where the name goes is the Materialized."""
    if isinstance(named, Materialized):
        if materialized is not None:
            raise TopologyError("two Materialized given: pass one")
        return None, named
    return named, materialized
