"""The source's options, checked on the driver when the query starts, and its output schema.

Names follow Spark's Kafka source, with ``riverlog.bootstrap.servers`` for
``kafka.bootstrap.servers``; any other ``riverlog.*`` option is handed to the consumer that reads
(e.g. ``riverlog.fetch.max.bytes``). A bad value or an unknown option fails here, naming it.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field

from broker.errors import InvalidConfigError

PREFIX = "riverlog."
EARLIEST, LATEST = -2, -1

SCHEMA = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
          "timestampType int")
HEADERS = "headers array<struct<key: string, value: binary>>"

_KNOWN = {"subscribe", "subscribepattern", "assign", "startingoffsets", "endingoffsets", "startingtimestamp",
          "startingoffsetsbytimestamp", "startingoffsetsbytimestampstrategy", "endingtimestamp",
          "endingoffsetsbytimestamp", "maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay",
          "minpartitions", "failondataloss", "includeheaders", "groupid", "path"}


def output_schema(include_headers: bool) -> str:
    return f"{SCHEMA}, {HEADERS}" if include_headers else SCHEMA


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


_UNITS = {"ms": 1, "millisecond": 1, "milliseconds": 1, "s": 1000, "sec": 1000, "second": 1000,
          "seconds": 1000, "m": 60_000, "min": 60_000, "minute": 60_000, "minutes": 60_000,
          "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000}


def _duration_ms(options: dict, name: str) -> int | None:
    raw = options.get(name.lower())
    if raw is None:
        return None
    m = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", raw.lower())
    if not m or (m.group(2) or "ms") not in _UNITS:
        raise _bad(name, f"must be a duration like '30s' or '5m', got {raw!r}")
    return int(m.group(1)) * _UNITS[m.group(2) or "ms"]


@dataclass
class SourceOptions:
    bootstrap_servers: str
    subscribe: list[str] = field(default_factory=list)
    subscribe_pattern: str | None = None
    assign: dict[str, list[int]] | None = None
    starting: object = "latest"
    ending: object = "latest"
    starting_timestamp: int | None = None
    starting_by_timestamp: dict | None = None
    timestamp_strategy: str = "error"
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    min_partitions: int | None = None
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
            try:
                re.compile(opts["subscribepattern"])
            except re.error as e:
                raise _bad("subscribePattern", f"is not a regular expression: {e}") from None
            out.subscribe_pattern = opts["subscribepattern"]
        else:
            try:
                doc = json.loads(opts["assign"])
                out.assign = {t: sorted(int(p) for p in ps) for t, ps in doc.items()}
            except (ValueError, AttributeError, TypeError):
                raise _bad("assign", "must be JSON like {\"topic\": [0, 1]}") from None
        out.starting = _offsets_spec(opts, "startingOffsets", "latest" if streaming else "earliest",
                                     ("earliest", "latest"))
        if isinstance(out.starting, dict) and not streaming and any(
                o == LATEST for parts in out.starting.values() for o in parts.values()):
            raise _bad("startingOffsets", "-1 (latest) is not allowed for a batch query")
        if "endingoffsets" in opts and streaming:
            raise _bad("endingOffsets", "applies to batch queries only")
        out.ending = _offsets_spec(opts, "endingOffsets", "latest", ("latest",))
        if out.ending == "earliest" or (isinstance(out.ending, dict) and any(
                o == EARLIEST for parts in out.ending.values() for o in parts.values())):
            raise _bad("endingOffsets", "-2 (earliest) is not allowed")
        if opts.get("startingtimestamp") is not None:
            try:
                out.starting_timestamp = int(opts["startingtimestamp"])
            except ValueError:
                raise _bad("startingTimestamp", "must be milliseconds since the epoch") from None
        if opts.get("startingoffsetsbytimestamp") is not None:
            try:
                doc = json.loads(opts["startingoffsetsbytimestamp"])
                out.starting_by_timestamp = {t: {int(p): int(ts) for p, ts in ps.items()} for t, ps in doc.items()}
            except (ValueError, AttributeError, TypeError):
                raise _bad("startingOffsetsByTimestamp", "must be JSON like {\"topic\": {\"0\": 1700000000000}}") \
                    from None
        strategy = opts.get("startingoffsetsbytimestampstrategy", "error").lower()
        if strategy not in ("error", "latest"):
            raise _bad("startingOffsetsByTimestampStrategy", "must be error or latest")
        out.timestamp_strategy = strategy
        out.max_offsets_per_trigger = _positive(opts, "maxOffsetsPerTrigger")
        out.min_offsets_per_trigger = _positive(opts, "minOffsetsPerTrigger")
        delay = _duration_ms(opts, "maxTriggerDelay")
        if delay is not None:
            out.max_trigger_delay_ms = delay
        if (out.max_offsets_per_trigger and out.min_offsets_per_trigger
                and out.min_offsets_per_trigger > out.max_offsets_per_trigger):
            raise _bad("minOffsetsPerTrigger", "is larger than maxOffsetsPerTrigger")
        out.min_partitions = _positive(opts, "minPartitions")
        out.fail_on_data_loss = _bool(opts, "failOnDataLoss", True)
        out.include_headers = _bool(opts, "includeHeaders", False)
        level = opts.get("riverlog.isolation.level", "read_committed")
        if level not in ("read_committed", "read_uncommitted"):
            raise _bad("riverlog.isolation.level", "must be read_committed or read_uncommitted")
        out.isolation_level = level
        out.consumer_config = {k[len(PREFIX):]: v for k, v in dict(options).items()
                               if k.lower().startswith(PREFIX)
                               and k.lower() not in ("riverlog.bootstrap.servers", "riverlog.isolation.level")}
        out.group_id = opts.get("groupid") or _generated_group(out)
        return out

    def client_config(self) -> dict:
        return {"bootstrap.servers": self.bootstrap_servers, "isolation.level": self.isolation_level,
                **self.consumer_config}


def _generated_group(o: SourceOptions) -> str:
    """Stable for the same query definition, so lag stays visible across restarts."""
    what = json.dumps([o.subscribe, o.subscribe_pattern, o.assign, str(o.starting)], sort_keys=True)
    return "spark-riverlog-" + hashlib.sha1(what.encode()).hexdigest()[:12]
