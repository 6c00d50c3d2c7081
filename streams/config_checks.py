"""Kafka's ``StreamsConfig`` types and validators for the keys Riverlog accepts without applying
(``num.stream.threads``, ``num.standby.replicas``, ``acceptable.recovery.lag``, …): Kafka's
``ConfigDef`` parses every key it defines when the config is made, so a value it refuses fails
the application at construction there, and here too, with Kafka's message
(``Invalid value abc for configuration num.stream.threads: Not a number of type INT``). The keys
Riverlog applies are checked where they are read (:mod:`streams.interpreter`, :mod:`streams.app_config`).
"""
from __future__ import annotations

from broker.errors import InvalidConfigError

_INT_RANGE = (-2**31, 2**31 - 1)
_LONG_RANGE = (-2**63, 2**63 - 1)

# key: (Kafka's type, the least value its validator allows or None)
_NUMBERS: dict[str, tuple[str, int | None]] = {
    "num.stream.threads": ("INT", None), "num.standby.replicas": ("INT", None),
    "max.warmup.replicas": ("INT", 1), "buffered.records.per.partition": ("INT", None),
    "rack.aware.assignment.non_overlap_cost": ("INT", None), "rack.aware.assignment.traffic_cost": ("INT", None),
    "metrics.num.samples": ("INT", 1), "receive.buffer.bytes": ("INT", -1), "send.buffer.bytes": ("INT", -1),
    "request.timeout.ms": ("INT", 0),
    "acceptable.recovery.lag": ("LONG", 0), "task.timeout.ms": ("LONG", 0),
    "connections.max.idle.ms": ("LONG", None), "log.summary.interval.ms": ("LONG", None),
    "metadata.max.age.ms": ("LONG", 0), "metrics.sample.window.ms": ("LONG", 0), "poll.ms": ("LONG", None),
    "probing.rebalance.interval.ms": ("LONG", 60_000), "reconnect.backoff.ms": ("LONG", 0),
    "reconnect.backoff.max.ms": ("LONG", 0), "retry.backoff.ms": ("LONG", 0),
    "state.cleanup.delay.ms": ("LONG", None), "window.size.ms": ("LONG", None),
    "windowstore.changelog.additional.retention.ms": ("LONG", None),
}
_UPGRADE_FROM = ("0.10.0", "0.10.1", "0.10.2", "0.11.0", "1.0", "1.1", "2.0", "2.1", "2.2", "2.3", "2.4", "2.5",
                 "2.6", "2.7", "2.8", "3.0", "3.1", "3.2", "3.3", "3.4", "3.5", "3.6", "3.7", "3.8")
# key: the strings Kafka's ``in(...)`` validator allows
_CHOICES: dict[str, tuple[str, ...]] = {
    "metrics.recording.level": ("INFO", "DEBUG", "TRACE"),
    "built.in.metrics.version": ("latest",),
    "default.dsl.store": ("rocksDB", "in_memory"),
    "rack.aware.assignment.strategy": ("none", "min_traffic", "balance_subtopology"),
    "upgrade.from": _UPGRADE_FROM,
}
_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _invalid(name: str, value, why: str) -> InvalidConfigError:
    return InvalidConfigError(f"Invalid value {value} for configuration {name}: {why}", config=name)


def kafka_number(name: str, value, kind: str) -> int:
    """``value`` parsed as Kafka's ``ConfigDef.parseType`` parses an ``INT`` or ``LONG``: an integer
    or a string of one; a float or a bool is refused, as Java's Double or Boolean is."""
    low, high = _INT_RANGE if kind == "INT" else _LONG_RANGE
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise _invalid(name, value, f"Expected value to be a {'32' if kind == 'INT' else '64'}-bit integer, "
                                    f"but it was a {type(value).__name__}")
    try:
        number = int(value.strip()) if isinstance(value, str) else value
    except ValueError:
        raise _invalid(name, value, f"Not a number of type {kind}") from None
    if not low <= number <= high:
        raise _invalid(name, value, f"Not a number of type {kind}")
    return number


def check_kafka_keys(config: dict) -> None:
    """Refuse, as Kafka's ``ConfigDef.parse`` does, a value of a Kafka Streams key that Kafka's
    type or validator refuses; None is a key left unset."""
    for name, (kind, least) in _NUMBERS.items():
        if config.get(name) is None:
            continue
        number = kafka_number(name, config[name], kind)
        if least is not None and number < least:
            raise _invalid(name, config[name], f"Value must be at least {least}")
    for name, allowed in _CHOICES.items():
        value = config.get(name)
        if value is not None and str(value).strip() not in allowed:
            raise _invalid(name, value, f"String must be one of: {', '.join(allowed)}")
    push = config.get("enable.metrics.push")
    if push is not None and not isinstance(push, bool) and str(push).strip().lower() not in ("true", "false"):
        raise _invalid("enable.metrics.push", push, "Expected value to be either true or false")
    protocol = config.get("security.protocol")
    if protocol is not None and str(protocol).strip().upper() not in _SECURITY_PROTOCOLS:
        raise _invalid("security.protocol", protocol,
                       f"String must be one of (case insensitive): {', '.join(_SECURITY_PROTOCOLS)}")
    if protocol is not None and str(protocol).strip().upper() != "PLAINTEXT":
        # Riverlog's clients refuse it too: not ignored, or the application would run unencrypted
        raise InvalidConfigError(f"security.protocol={protocol!r} is not supported: Riverlog's listeners speak "
                                 f"plaintext gRPC; put TLS in front of them (a proxy or a service mesh)",
                                 config="security.protocol")
