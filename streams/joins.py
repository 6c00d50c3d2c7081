"""Join parameters as Kafka Streams names them — ``Joined`` (stream–table), ``StreamJoined``
(stream–stream), ``TableJoined`` (foreign-key) — the joiner argument, and the co-partitioning
rule every key-based join checks.

A joiner is a SQL expression or a callable. In SQL the two sides are ``left`` (also ``value``, so
a stream–table enrichment reads ``struct(value.amount AS amount, right.tier AS tier)``) and
``right``, plus ``key``; the side that did not match is NULL. A callable is Kafka's
``ValueJoiner.apply(left, right)`` or ``ValueJoinerWithKey.apply(key, left, right)`` by its arity.

    orders.join(customers, "struct(value.amount AS amount, right.tier AS tier)")
    clicks.leftJoin(views, lambda c, v: (c, v), JoinWindows.ofTimeDifferenceWithNoGrace(5_000))
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable

from streams.errors import TopologyError
from streams.functions import Fn
from streams.parameters import Materialized, _serde, check_name


class TopicsNotCopartitionedError(TopologyError):
    """Kafka's ``TopologyException: Topics not co-partitioned``: the two sides of a key-based join
    read topics with different partition counts, so equal keys would land in different tasks."""
    code, name, retriable, grpc_status = 1240, "TOPICS_NOT_COPARTITIONED", False, "INVALID_ARGUMENT"


class JoinNotOnSparkError(TopologyError):
    """The topology uses an operation that runs under TopologyTestDriver (the reference
    interpreter) but not as Spark queries; raised by ``build(spark, config)``."""
    code, name, retriable, grpc_status = 1241, "JOIN_NOT_ON_SPARK", False, "UNIMPLEMENTED"


JOIN_OPS = {"join-windowed", "stream-join", "stream-table-join", "stream-global-join", "join-this", "join-other",
            "join-merge", "fk-subscription-send", "cogroup-aggregate", "globalTable"}
NOT_ON_SPARK: set[str] = set()


def refuse_on_spark(topology) -> None:
    ops = sorted({n.name for n in topology.nodes if n.op in NOT_ON_SPARK})
    if ops:
        raise JoinNotOnSparkError(f"{', '.join(ops[:3])}{' ...' if len(ops) > 3 else ''}: this join kind runs "
                                  f"under TopologyTestDriver only; its Spark runtime is not built yet")


def joiner(arg, what: str = "joiner") -> Callable[[Any, Any, Any], Any]:
    """``(key, left, right) -> result`` from a SQL expression or a ValueJoiner(WithKey)."""
    f = Fn(arg, what, (2, 3))
    if f.is_sql:
        return _SqlJoiner(f)
    if f.arity == 2:
        return _TwoArgs(f.fn)
    return f.fn


class _SqlJoiner:
    __slots__ = ("f",)

    def __init__(self, f: Fn):
        self.f = f

    def __call__(self, key, left, right):
        return self.f.evaluate({"key": key, "value": left, "left": left, "right": right})


class _TwoArgs:
    __slots__ = ("fn",)

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, key, left, right):
        return self.fn(left, right)


def reverse(j: Callable) -> Callable:
    """Kafka's ``reverseJoiner``: the other side's processor calls the user's joiner with the
    sides in the user's order."""
    return lambda key, other, this: j(key, this, other)


@dataclass(frozen=True)
class Joined:
    """Stream–table join parameters: serdes, a name, and (KIP-923) a grace period during which a
    stream record waits so that a late table update with an older timestamp still counts (only
    with a versioned table)."""
    key_serde: Any = None
    value_serde: Any = None
    other_value_serde: Any = None
    name: str | None = None
    grace_ms: int | None = None

    @staticmethod
    def with_(key_serde=None, value_serde=None, other_value_serde=None, name: str | None = None) -> "Joined":
        """Serdes as instances, classes or Kafka's class names, as ``Consumed.with_`` takes them."""
        return Joined(_serde(key_serde, "Joined key serde"), _serde(value_serde, "Joined value serde"),
                      _serde(other_value_serde, "Joined other value serde"), check_name(name, "Joined"))

    @staticmethod
    def as_(name: str) -> "Joined":
        return Joined(name=check_name(name, "Joined"))

    @staticmethod
    def keySerde(serde) -> "Joined":
        return Joined().withKeySerde(serde)

    @staticmethod
    def valueSerde(serde) -> "Joined":
        return Joined().withValueSerde(serde)

    @staticmethod
    def otherValueSerde(serde) -> "Joined":
        return Joined().withOtherValueSerde(serde)

    def withKeySerde(self, serde) -> "Joined":
        return replace(self, key_serde=_serde(serde, "Joined key serde"))

    def withValueSerde(self, serde) -> "Joined":
        return replace(self, value_serde=_serde(serde, "Joined value serde"))

    def withOtherValueSerde(self, serde) -> "Joined":
        return replace(self, other_value_serde=_serde(serde, "Joined other value serde"))

    def withName(self, name: str) -> "Joined":
        return replace(self, name=check_name(name, "Joined"))

    def withGracePeriod(self, grace) -> "Joined":
        from streams.windows import duration_ms
        ms = duration_ms(grace, "Joined grace period")
        if ms < 0:
            raise TopologyError("Joined grace period must not be negative")
        return replace(self, grace_ms=ms)


@dataclass(frozen=True)
class StreamJoined:
    """Stream–stream join parameters: serdes of both sides, the processors' name and the store
    name (``<name>-this-join-store``, ``<name>-other-join-store`` and, for left/outer joins, the
    shared store of not-yet-joined records). ``log_config``: the changelog configs of those stores."""
    key_serde: Any = None
    value_serde: Any = None
    other_value_serde: Any = None
    name: str | None = None
    store_name: str | None = None
    log_config: tuple = ()

    @staticmethod
    def with_(key_serde=None, value_serde=None, other_value_serde=None) -> "StreamJoined":
        """Serdes as instances, classes or Kafka's class names, as ``Consumed.with_`` takes them."""
        return StreamJoined(_serde(key_serde, "StreamJoined key serde"),
                            _serde(value_serde, "StreamJoined value serde"),
                            _serde(other_value_serde, "StreamJoined other value serde"))

    @staticmethod
    def as_(store_name: str) -> "StreamJoined":
        return StreamJoined(store_name=check_name(store_name, "StreamJoined store name"))

    def withName(self, name: str) -> "StreamJoined":
        return replace(self, name=check_name(name, "StreamJoined"))

    def withStoreName(self, store_name: str) -> "StreamJoined":
        return replace(self, store_name=check_name(store_name, "StreamJoined store name"))

    def withKeySerde(self, serde) -> "StreamJoined":
        return replace(self, key_serde=_serde(serde, "StreamJoined key serde"))

    def withValueSerde(self, serde) -> "StreamJoined":
        return replace(self, value_serde=_serde(serde, "StreamJoined value serde"))

    def withOtherValueSerde(self, serde) -> "StreamJoined":
        return replace(self, other_value_serde=_serde(serde, "StreamJoined other value serde"))

    def withLoggingEnabled(self, config: dict | None = None) -> "StreamJoined":
        """Topic configs for the changelogs of the join's stores (both window stores and the shared
        outer store), checked as ``Materialized.withLoggingEnabled`` checks them."""
        return replace(self, log_config=Materialized().withLoggingEnabled(config).log_config)

    def withLoggingDisabled(self) -> "StreamJoined":
        raise TopologyError("withLoggingDisabled: Riverlog stores are always logged, because the changelog "
                            "is what lets an application restart from the broker alone")


@dataclass(frozen=True)
class TableJoined:
    """Foreign-key join parameters: the name of its processors and internal topics."""
    name: str | None = None

    @staticmethod
    def as_(name: str) -> "TableJoined":
        return TableJoined(check_name(name, "TableJoined"))

    def withName(self, name: str) -> "TableJoined":
        return replace(self, name=check_name(name, "TableJoined"))


# ---------------------------------------------------------------------- co-partitioning
def upstream_sources(node) -> list:
    """The source nodes feeding ``node`` (inside its sub-topology: a source starts one)."""
    out, seen, todo = [], set(), [node]
    while todo:
        n = todo.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if n.kind == "source":
            out.append(n)
        todo.extend(n.parents)
    return out


def _source_topics(node, app: str) -> list[tuple[str, bool]]:
    """The topics feeding ``node`` inside its sub-topology: (resolved name, internal)."""
    from streams.topology import Topology
    return [(Topology.topic(app, n, t), n.internal) for n in upstream_sources(node) for t in n.topics]


def copartition(topology, app: str, partitions: Callable[[str], int | None]) -> dict[str, int]:
    """Kafka's ``CopartitionedTopicsEnforcer``, per key-based join (``args['copartition']`` names
    the nodes of both sides): external topics must share one partition count and the group's
    repartition topics take it; a group of repartition topics only takes the count fixed with
    ``Repartitioned`` (all alike) or else the most of them. A fixed count that differs is refused,
    as Kafka refuses it. ``partitions`` gives an external topic's count; returns the counts set."""
    fixed: dict[str, int] = {}

    def count(topic: str) -> int:
        if topic in fixed:
            return fixed[topic]
        n = topology.repartition_partitions(app, topic, count)
        return n if n is not None else (partitions(topic) or 1)

    for n in topology.nodes:
        sides = n.args.get("copartition")
        if not sides:
            continue
        topics: dict[str, bool] = {}
        for side in sides:
            topics.update(_source_topics(side, app))
        internal = [t for t, is_internal in topics.items() if is_internal]
        external = [(t, partitions(t)) for t, is_internal in topics.items() if not is_internal]
        external = [(t, p) for t, p in external if p is not None]
        enforced = {t: e for t in internal if (e := topology.enforced_partitions(app, t)) is not None}
        if external:
            if len({p for _, p in external}) > 1:
                names = ", ".join(f"{t} ({p} partitions)" for t, p in external)
                raise TopicsNotCopartitionedError(
                    f"Topics not co-partitioned: [{names}] are joined by {n.name}; give them the same number "
                    f"of partitions, or repartition one side (selectKey/repartition) before the join")
            wanted = external[0][1]
        elif enforced:
            if len(set(enforced.values())) > 1:
                names = ", ".join(f"{t} ({p} partitions)" for t, p in sorted(enforced.items()))
                raise TopicsNotCopartitionedError(
                    f"Following topics do not have the same number of partitions: [{names}], joined by "
                    f"{n.name}: give both Repartitioned the same numberOfPartitions")
            wanted = next(iter(enforced.values()))
        elif internal:
            wanted = max(count(t) for t in internal)
        else:
            continue
        for t in internal:
            if enforced.get(t, wanted) != wanted:
                raise TopicsNotCopartitionedError(
                    f"Number of partitions [{enforced[t]}] of repartition topic [{t}] doesn't match number of "
                    f"partitions [{wanted}] of the source topic, joined by {n.name}: give Repartitioned "
                    f"numberOfPartitions({wanted}) or leave the count to the join")
            fixed[t] = wanted
    return fixed
