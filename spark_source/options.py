"""The source's options, checked on the driver when the query starts, and its output schema.

Names and meanings follow Spark's Kafka source, with ``riverlog.bootstrap.servers`` for
``kafka.bootstrap.servers``; any other ``riverlog.*`` option is handed to the consumer that reads
(e.g. ``riverlog.fetch.max.bytes``). A bad value or an unknown option fails here, naming it; so does
a ``riverlog.*`` setting the source would have to replace (``auto.offset.reset``,
``enable.auto.commit``) or a batch whose explicit start lies past its end. Options Spark's Kafka
source ignores with a warning (``groupIdPrefix`` next to a group, a stream's ``endingTimestamp``,
a batch's ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger`` and ``maxTriggerDelay``) are ignored
with a warning here too.

Precedence is Spark's: ``startingTimestamp`` over ``startingOffsetsByTimestamp`` over
``startingOffsets``, and ``endingTimestamp`` over ``endingOffsetsByTimestamp`` over
``endingOffsets``; the one that loses is named in a warning, and only the winner is checked against
the query (a batch cannot start at ``latest`` nor end at ``earliest``), as Spark checks it.
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass, field

from broker.errors import InvalidConfigError

log = logging.getLogger(__name__)

PREFIX = "riverlog."
EARLIEST, LATEST = -2, -1
DEFAULT_GROUP_PREFIX = "spark-riverlog"
# The source decides these itself (Spark's Kafka source refuses the same ``kafka.*`` settings).
_REFUSED = {"auto.offset.reset": "set startingOffsets instead (a query starts where that option says)",
            "enable.auto.commit": "the source commits each finished micro-batch's offsets itself",
            "key.deserializer": "keys are returned as bytes (binary); use DataFrame operations to deserialize them",
            "value.deserializer": "values are returned as bytes (binary); use DataFrame operations to deserialize "
                                  "them",
            "interceptor.classes": "an interceptor could change the records the source returns"}

# ``timestamp_ltz``, not ``timestamp``: Spark's Kafka source's column is a TimestampType whatever the
# session's ``spark.sql.timestampType`` says (under TIMESTAMP_NTZ, ``timestamp`` would parse as
# timestamp_ntz and every task fail on the UTC instants it returns).
SCHEMA = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp_ltz, "
          "timestampType int")
HEADERS = "headers array<struct<key: string, value: binary>>"
# The same columns as Spark names their types (``StructField.simpleString``), to recognise the schema.
_COLUMNS = ("key:binary", "value:binary", "topic:string", "partition:int", "offset:bigint", "timestamp:timestamp",
            "timestampType:int")
_HEADERS_COLUMN = "headers:array<struct<key:string,value:binary>>"

_KNOWN = {"subscribe", "subscribepattern", "assign", "startingoffsets", "endingoffsets", "startingtimestamp",
          "startingoffsetsbytimestamp", "startingoffsetsbytimestampstrategy", "endingtimestamp",
          "endingoffsetsbytimestamp", "maxoffsetspertrigger", "unlimitedtopics", "alignbytimestamp",
          "minoffsetspertrigger", "maxtriggerdelay", "minpartitions", "maxrecordsperpartition", "failondataloss",
          "includeheaders", "groupid", "groupidprefix", "kafkaconsumer.polltimeoutms", "fetchoffset.numretries",
          "fetchoffset.retryintervalms", "path"}


def output_schema(include_headers: bool) -> str:
    return f"{SCHEMA}, {HEADERS}" if include_headers else SCHEMA


def check_fixed_schema(schema, include_headers: bool) -> None:
    """The schema Spark hands the reader is the source's own unless the query set one with
    ``.schema(...)``, which Spark's Kafka source refuses (its schema is fixed); here it would fail
    every task later (``DATA_SOURCE_RETURN_SCHEMA_MISMATCH``), so it is refused when the query starts."""
    wanted = [*_COLUMNS, _HEADERS_COLUMN] if include_headers else list(_COLUMNS)
    given = [f.simpleString() for f in schema.fields] if schema is not None else wanted
    if given != wanted:
        raise InvalidConfigError(f"the riverlog source has a fixed schema, struct<{','.join(wanted)}> (Spark's Kafka "
                                 f"source's), and cannot be set with a custom one, struct<{','.join(given)}>: drop "
                                 ".schema(...) and select or cast the columns after load()", config="schema")


def _bad(option: str, why: str) -> InvalidConfigError:
    return InvalidConfigError(f"option '{option}': {why}", config=option)


def _bool(options: dict, name: str, default: bool) -> bool:
    value = options.get(name.lower())
    if value is None:
        return default
    if str(value).lower() not in ("true", "false"):
        raise _bad(name, f"must be true or false, got {value!r}")
    return str(value).lower() == "true"


def _positive(options: dict, name: str) -> int | None:
    value = options.get(name.lower())
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        raise _bad(name, f"must be a whole number, got {value!r}") from None
    if number <= 0:
        raise _bad(name, f"must be positive, got {value}")
    return number


def _count(options: dict, name: str, default: int, least: int) -> int:
    value = options.get(name.lower())
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise _bad(name, f"must be a whole number, got {value!r}") from None
    if number < least:
        raise _bad(name, f"must be at least {least}, got {number}")
    return number


def _timestamp(options: dict, name: str) -> int | None:
    value = options.get(name.lower())
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise _bad(name, f"must be milliseconds since the epoch, got {value!r}") from None


def _timestamps(options: dict, name: str) -> dict | None:
    raw = options.get(name.lower())
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
        return {t: {int(p): int(ts) for p, ts in ps.items()} for t, ps in doc.items()}
    except (ValueError, AttributeError, TypeError):
        raise _bad(name, f"must be JSON like {{\"topic\": {{\"0\": 1700000000000}}}}, got {raw!r}") from None


def _winner(opts: dict, names: tuple[str, ...]) -> str | None:
    """Spark's precedence: the first of ``names`` that is set wins; the others are named in a warning."""
    given = [n for n in names if opts.get(n.lower()) is not None]
    if len(given) > 1:
        log.warning("option '%s' takes precedence: %s not used (as in Spark's Kafka source)", given[0],
                    ", ".join(f"'{n}'" for n in given[1:]))
    return given[0] if given else None


def _offsets_spec(options: dict, name: str, default: str, allowed: tuple[str, ...]):
    """``earliest``/``latest`` or JSON ``{"topic": {"0": 23, "1": -2}}`` (-2 earliest, -1 latest)."""
    raw = options.get(name.lower(), default)
    if raw.strip().lower() in allowed:
        return raw.strip().lower()
    try:
        doc = json.loads(raw)
        return {t: {int(p): int(o) for p, o in parts.items()} for t, parts in doc.items()}
    except (ValueError, AttributeError, TypeError):
        raise _bad(name, f"must be {' or '.join(allowed)} or JSON like {{\"topic\": {{\"0\": 23}}}}, "
                         f"got {raw!r}") from None


def _refuse_bound(spec, name: str, word: str, sentinel: int, why: str) -> None:
    """Spark's ``validateBatchOptions``, applied to the option that won the precedence only: a batch
    read cannot start at ``latest`` (-1) nor end at ``earliest`` (-2). Spark's own sentence is
    quoted, so a search for it finds the cause."""
    bound = "starting offset" if name == "startingOffsets" else "ending offset"
    if spec == word:
        raise _bad(name, f"can't be {word} ({bound} can't be {word} for batch queries on Kafka: {why})")
    for topic, parts in spec.items() if isinstance(spec, dict) else ():
        for partition, offset in parts.items():
            if offset == sentinel:
                spark = "startingOffsets for" if name == "startingOffsets" else "ending offset for"
                raise _bad(name, f"{sentinel} ({word}) for {topic}-{partition}: {why} ({spark} {topic}-{partition} "
                                 f"can't be {word} for batch queries on Kafka)")


def _check_limits(start_by: str | None, end_by: str | None, out: "SourceOptions") -> None:
    """Spark's ``checkOffsetLimitValidity`` for a batch: explicit start and end offsets (or start
    and end timestamps per partition) name the same partitions, and no start lies past its end."""
    if start_by in (None, "startingOffsets") and end_by in (None, "endingOffsets"):
        start, end, what = out.starting, out.ending, ("startingOffsets", "endingOffsets", "offset")
    elif start_by == "startingOffsetsByTimestamp" and end_by == "endingOffsetsByTimestamp":
        start, end = out.starting_by_timestamp, out.ending_by_timestamp
        what = ("startingOffsetsByTimestamp", "endingOffsetsByTimestamp", "timestamp")
    else:
        return
    if not (isinstance(start, dict) and isinstance(end, dict)):
        return
    first = {(t, p): v for t, ps in start.items() for p, v in ps.items()}
    last = {(t, p): v for t, ps in end.items() for p, v in ps.items()}
    if set(first) != set(last):
        def names(tps) -> str:
            return ", ".join(f"{t}-{p}" for t, p in sorted(tps))
        raise _bad(what[0], f"names {names(first)} but '{what[1]}' names {names(last)}: name the same partitions "
                            "in both (Spark's MISMATCHED_TOPIC_PARTITIONS_BETWEEN_START_OFFSET_AND_END_OFFSET)")
    for (t, p), v in sorted(first.items()):
        if v > last[(t, p)] >= 0:   # -2/-1 (earliest, latest) are not compared, as in Spark
            raise _bad(what[0], f"{what[2]} {v} of {t}-{p} is after its end {what[2]} {last[(t, p)]} in "
                                f"'{what[1]}': a batch cannot end before it starts "
                                "(Spark's UNRESOLVED_START_OFFSET_GREATER_THAN_END_OFFSET)")


def _pattern(raw: str) -> str:
    """``subscribePattern`` as Spark takes it: trimmed, and matching a topic if found anywhere in its
    name (``findFirstIn``); anchor it (``^orders-.*$``) to match whole names. Python's ``re`` reads it:
    Java-only syntax (``\\p{L}``, ``(?<name>...)``) is refused here rather than matching differently."""
    pattern = raw.strip()
    if not pattern:
        raise _bad("subscribePattern", "is empty: give a regular expression over topic names")
    try:
        re.compile(pattern)
    except re.error as e:
        raise _bad("subscribePattern", f"is not a regular expression: {e}") from None
    return pattern


# Spark's time strings (JavaUtils.timeStringAs): a whole number and an optional unit, no space.
_UNITS_US = {"us": 1, "ms": 1000, "s": 10**6, "m": 60 * 10**6, "min": 60 * 10**6, "h": 3600 * 10**6,
             "d": 86_400 * 10**6}


def _duration_ms(options: dict, name: str) -> int | None:
    """Spark's grammar, ``-?[0-9]+(us|ms|s|m|min|h|d)?`` (no unit: milliseconds), truncated to whole
    milliseconds as Spark's ``timeStringAsMs`` does."""
    raw = options.get(name.lower())
    if raw is None:
        return None
    m = re.fullmatch(r"(-?[0-9]+)([a-z]+)?", str(raw).strip().lower())
    if not m or (m.group(2) or "ms") not in _UNITS_US:
        raise _bad(name, f"must be a duration like '30s', '5m' or '1h' (units us, ms, s, m, min, h, d), "
                         f"got {raw!r}")
    us = int(m.group(1)) * _UNITS_US[m.group(2) or "ms"]
    return -(-us // 1000) if us < 0 else us // 1000


@dataclass
class SourceOptions:
    bootstrap_servers: str
    subscribe: list[str] = field(default_factory=list)
    subscribe_pattern: str | None = None
    assign: dict[str, list[int]] | None = None
    starting: object = "latest"
    ending: object = "latest"
    starting_timestamp: int | None = None        # wins over starting_by_timestamp, which wins over starting
    starting_by_timestamp: dict | None = None
    timestamp_strategy: str = "error"
    ending_timestamp: int | None = None          # batch only; wins over ending_by_timestamp and ending
    ending_by_timestamp: dict | None = None
    poll_timeout_ms: int = 120_000               # Spark's spark.network.timeout default
    fetch_offset_attempts: int = 3
    fetch_offset_retry_interval_ms: int = 1000   # Spark's readers' (its documentation says 10)
    max_offsets_per_trigger: int | None = None
    unlimited_topics: frozenset[str] = frozenset()   # read to their end in every batch, outside the rate limit
    align_by_timestamp: bool = False                 # a rate-limited cut moved back to one timestamp
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    isolation_level: str = "read_committed"
    group_id: str = ""
    consumer_config: dict = field(default_factory=dict)

    @staticmethod
    def include_headers_of(options) -> bool:
        return _bool({k.lower(): v for k, v in dict(options).items()}, "includeHeaders", False)

    @classmethod
    def parse(cls, options, streaming: bool) -> "SourceOptions":
        opts = {k.lower(): v for k, v in dict(options).items()}
        servers = opts.get("riverlog.bootstrap.servers", "").strip()
        if not servers:
            raise _bad("riverlog.bootstrap.servers", "is required (host:port of any broker)")
        for key in opts:
            if key not in _KNOWN and not key.startswith(PREFIX):
                raise _bad(key, "is not an option of the riverlog source (see docs/spark.md)")
        chosen = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k)]
        if len(chosen) != 1:
            raise _bad("subscribe", "give exactly one of subscribe, subscribePattern or assign")
        out = cls(servers)
        if "subscribe" in chosen:
            out.subscribe = [t.strip() for t in opts["subscribe"].split(",") if t.strip()]
            if not out.subscribe:
                raise _bad("subscribe", "names no topic")
        elif "subscribepattern" in chosen:
            out.subscribe_pattern = _pattern(opts["subscribepattern"])
        else:
            try:
                doc = json.loads(opts["assign"])
                out.assign = {t: sorted(int(p) for p in ps) for t, ps in doc.items()}
            except (ValueError, AttributeError, TypeError):
                raise _bad("assign", "must be JSON like {\"topic\": [0, 1]}") from None
        out.starting = _offsets_spec(opts, "startingOffsets", "latest" if streaming else "earliest",
                                     ("earliest", "latest"))
        for name in ("endingOffsets", "endingOffsetsByTimestamp"):   # Spark's validateStreamOptions
            if name.lower() in opts and streaming:
                raise _bad(name, "applies to batch queries only")
        if streaming and "endingtimestamp" in opts:
            log.warning("option 'endingTimestamp' has no effect on a streaming query (as in Spark's Kafka "
                        "source): it reads on")
        out.ending = _offsets_spec(opts, "endingOffsets", "latest", ("earliest", "latest"))
        out.starting_timestamp = _timestamp(opts, "startingTimestamp")
        out.starting_by_timestamp = _timestamps(opts, "startingOffsetsByTimestamp")
        start_by = _winner(opts, ("startingTimestamp", "startingOffsetsByTimestamp", "startingOffsets"))
        if start_by == "startingTimestamp":
            out.starting_by_timestamp = None
        out.ending_timestamp = _timestamp(opts, "endingTimestamp")
        out.ending_by_timestamp = _timestamps(opts, "endingOffsetsByTimestamp")
        end_by = _winner(opts, ("endingTimestamp", "endingOffsetsByTimestamp", "endingOffsets"))
        if end_by == "endingTimestamp":
            out.ending_by_timestamp = None
        if not streaming and start_by in (None, "startingOffsets"):
            _refuse_bound(out.starting, "startingOffsets", "latest", LATEST,
                          "a batch query would start at the end and read nothing; give earliest, offsets "
                          "or a timestamp")
        if end_by in (None, "endingOffsets"):
            _refuse_bound(out.ending, "endingOffsets", "earliest", EARLIEST,
                          "a batch query would end before it starts; give latest, offsets or a timestamp")
        if not streaming:
            _check_limits(start_by, end_by, out)
        if streaming:
            out.ending_timestamp = None
        else:   # Spark's validateBatchOptions: a batch reads its whole range in one go
            for name in ("maxOffsetsPerTrigger", "minOffsetsPerTrigger", "maxTriggerDelay"):
                if name.lower() in opts:
                    log.warning("%s option ignored in batch queries (as in Spark's Kafka source)", name)
        strategy = opts.get("startingoffsetsbytimestampstrategy", "error").lower()
        if strategy not in ("error", "latest"):
            raise _bad("startingOffsetsByTimestampStrategy", "must be error or latest")
        out.timestamp_strategy = strategy
        out.max_offsets_per_trigger = _positive(opts, "maxOffsetsPerTrigger")
        out.unlimited_topics = frozenset(t.strip() for t in opts.get("unlimitedtopics", "").split(",") if t.strip())
        out.align_by_timestamp = _bool(opts, "alignByTimestamp", False)
        for name, given in (("unlimitedTopics", out.unlimited_topics), ("alignByTimestamp", out.align_by_timestamp)):
            if given and not (streaming and out.max_offsets_per_trigger):
                raise _bad(name, "acts on a streaming query's maxOffsetsPerTrigger: set that too, or drop it")
        strays = sorted(out.unlimited_topics - set(out.subscribe)) if out.subscribe else []
        if strays:
            raise _bad("unlimitedTopics", f"names {', '.join(strays)}, which 'subscribe' does not")
        out.min_offsets_per_trigger = _positive(opts, "minOffsetsPerTrigger")
        delay = _duration_ms(opts, "maxTriggerDelay")
        if delay is not None:
            out.max_trigger_delay_ms = delay
        if (out.max_offsets_per_trigger and out.min_offsets_per_trigger
                and out.min_offsets_per_trigger > out.max_offsets_per_trigger):
            raise _bad("minOffsetsPerTrigger", "is larger than maxOffsetsPerTrigger")
        out.min_partitions = _positive(opts, "minPartitions")
        out.max_records_per_partition = _positive(opts, "maxRecordsPerPartition")
        out.fail_on_data_loss = _bool(opts, "failOnDataLoss", True)
        out.include_headers = _bool(opts, "includeHeaders", False)
        out.poll_timeout_ms = _count(opts, "kafkaConsumer.pollTimeoutMs", out.poll_timeout_ms, 1)
        out.fetch_offset_attempts = _count(opts, "fetchOffset.numRetries", out.fetch_offset_attempts, 1)
        out.fetch_offset_retry_interval_ms = _count(opts, "fetchOffset.retryIntervalMs",
                                                    out.fetch_offset_retry_interval_ms, 0)
        level = opts.get("riverlog.isolation.level", "read_committed")
        if level not in ("read_committed", "read_uncommitted"):
            raise _bad("riverlog.isolation.level", "must be read_committed or read_uncommitted")
        out.isolation_level = level
        consumer = {k[len(PREFIX):]: v for k, v in dict(options).items() if k.lower().startswith(PREFIX)}
        for name in consumer:
            if name.lower() in _REFUSED:
                raise _bad(PREFIX + name, f"is set by the riverlog source: {_REFUSED[name.lower()]}")
        out.consumer_config = {k: v for k, v in consumer.items()
                               if k.lower() not in ("bootstrap.servers", "isolation.level", "group.id")}
        out.group_id = _group_id(opts)
        return out

    def start_fingerprint(self) -> str:
        """A digest of what decides where a query with no checkpoint starts: its topics or
        partitions and its winning start option. Batch 0's pinned start (``StreamReader.initialOffset``)
        carries it, so a query with other start options never starts at an older query's pin."""
        what = [sorted(self.subscribe), self.subscribe_pattern, self.assign, self.starting, self.starting_timestamp,
                self.starting_by_timestamp, self.timestamp_strategy]
        return hashlib.sha1(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]

    def client_config(self) -> dict:
        return {"bootstrap.servers": self.bootstrap_servers, "isolation.level": self.isolation_level,
                **self.consumer_config}


def _group_id(opts: dict) -> str:
    """``groupId`` (Riverlog's name) or ``riverlog.group.id`` (Spark's ``kafka.group.id``), else
    ``groupIdPrefix`` and a hash of the query's definition: stable for the same query, so lag stays
    visible across restarts. A prefix next to an explicit group has no effect and is named in a
    warning, as Spark's ``validateGeneralOptions`` does."""
    explicit = {n: opts[n.lower()] for n in ("groupId", "riverlog.group.id") if opts.get(n.lower())}
    if len(set(explicit.values())) > 1:
        raise _bad("groupId", f"and 'riverlog.group.id' name different groups ({explicit['groupId']!r}, "
                              f"{explicit['riverlog.group.id']!r}): give one")
    if explicit and opts.get("groupidprefix") is not None:
        log.warning("option 'groupIdPrefix' will be ignored as option '%s' has been set", next(iter(explicit)))
    if explicit:
        return next(iter(explicit.values()))
    prefix = opts.get("groupidprefix", DEFAULT_GROUP_PREFIX)
    if not prefix.strip():
        raise _bad("groupIdPrefix", "is empty")
    what = json.dumps([opts.get(k) for k in ("subscribe", "subscribepattern", "assign", "startingoffsets",
                                             "startingtimestamp", "startingoffsetsbytimestamp")], sort_keys=True)
    return f"{prefix}-{hashlib.sha1(what.encode()).hexdigest()[:12]}"
