"""Config requests (Kafka's DescribeConfigs, AlterConfigs and IncrementalAlterConfigs):
a topic's configs with their sources, the broker's read-only ones, and topic overrides altered
through the controller."""
from __future__ import annotations

from broker.config import BROKER_SYNONYMS, TOPIC_CONFIG, Config, altered_configs
from broker.errors import InvalidRequestError
from broker.proto import riverlog_pb2 as pb
from broker.server.broker import Broker
from broker.server.request_results import duplicates, fill_error

RESOURCE_TOPIC, RESOURCE_BROKER = 2, 4


def describe_configs(broker: Broker, request: pb.DescribeConfigsRequest) -> pb.DescribeConfigsResponse:
    response = pb.DescribeConfigsResponse()
    for resource in request.resources:
        result = response.results.add(resource=resource)
        try:
            _describe(broker, resource, result)
        except Exception as e:  # noqa: BLE001
            fill_error(result, e)
    return response


def _describe(broker: Broker, resource: pb.ConfigResource, result) -> None:
    """Each config with its value, its source and its synonyms: every place its value could come
    from, most specific first and itself included, as Kafka's ``ConfigHelper.describeConfigs``
    answers (librdkafka always asks for them, confluent-kafka lists them in ``ConfigEntry.synonyms``):
    a topic override (DYNAMIC_TOPIC_CONFIG), the broker setting that supplies the topic default
    (STATIC_BROKER_CONFIG, when set), and the built-in default (DEFAULT_CONFIG)."""
    b = broker
    definition = b.config._definition
    if resource.type == RESOURCE_TOPIC:
        topic = b.topic(resource.name)
        config = b.topic_config(topic)
        for key in TOPIC_CONFIG.describe():
            synonyms = []
            if key.name in topic.configs:
                synonyms.append((key.name, _text(config[key.name]), "DYNAMIC_TOPIC_CONFIG"))
            chain = BROKER_SYNONYMS.get(key.name, (key.broker_default,))
            synonyms += [(name, _text(b.config[name]), "STATIC_BROKER_CONFIG") for name in chain
                         if name in b.config.overrides]
            default = definition.keys.get(chain[-1], key)   # Kafka's: log.retention.hours=168, log.roll.hours=168
            synonyms.append((default.name, _text(default.default), "DEFAULT_CONFIG"))
            source = synonyms[0][2]
            entry = result.entries.add(name=key.name, value=_text(config[key.name]), source=source,
                                       is_default=source == "DEFAULT_CONFIG", documentation=key.doc)
            _add_synonyms(entry, synonyms)
    elif resource.type == RESOURCE_BROKER:
        if resource.name not in ("", str(b.node_id)):
            raise InvalidRequestError(f"this is broker {b.node_id}, not {resource.name}")
        for key in definition.describe():
            value, synonyms = broker_entry(b.config, key.name)
            source = synonyms[0][2]
            entry = result.entries.add(name=key.name, value=value, source=source, is_default=source == "DEFAULT_CONFIG",
                                       read_only=True, documentation=key.doc)
            _add_synonyms(entry, synonyms)
    else:
        raise InvalidRequestError(f"config resource type {resource.type} is not supported (2 topic, 4 broker)")


_UNIT_MS = {"log.retention.ms": 1, "log.retention.minutes": 60_000, "log.retention.hours": 3_600_000,
            "log.roll.ms": 1, "log.roll.hours": 3_600_000}


def broker_entry(config: Config, name: str) -> tuple[str, list[tuple[str, str, str]]]:
    """A broker config's value and its synonyms (name, value, source), most specific first.

    A key of a chain (``log.retention.ms`` before ``.minutes`` before ``.hours``, ``log.roll.ms``
    before ``.hours``) that is not set while a coarser one is shows the value the broker uses, in
    its own unit, taken from that coarser key (``KafkaConfig.logRetentionTimeMillis``): its own
    built-in default is not in force, and showing it (``log.retention.ms=604800000`` under
    ``log.retention.hours=24``) would tell an operator the wrong retention. Kafka shows null there."""
    default = config._definition.keys[name].default
    chain = next((c[c.index(name):] for c in BROKER_SYNONYMS.values() if name in c), (name,))
    given = [(n, _text(config[n]), "STATIC_BROKER_CONFIG") for n in chain if n in config.overrides]
    if name in config.overrides or not given:
        return _text(config[name]), given[:1] + [(name, _text(default), "DEFAULT_CONFIG")]
    coarser = given[0][0]
    millis = config[coarser] * _UNIT_MS[coarser]
    value = -1 if millis < 0 else millis // _UNIT_MS[name]
    coarsest = config._definition.keys[chain[-1]]
    return str(value), given + [(coarsest.name, _text(coarsest.default), "DEFAULT_CONFIG")]


def _add_synonyms(entry, synonyms: list[tuple[str, str, str]]) -> None:
    for name, value, source in synonyms:
        entry.synonyms.add(name=name, value=value, source=source)


def alter_configs(broker: Broker, request: pb.AlterConfigsRequest) -> pb.AlterConfigsResponse:
    """A resource named twice is answered ``INVALID_REQUEST`` "Duplicate resource." once and
    left as it is, and a config named twice in one resource "Error due to duplicate config
    keys" (Kafka's ControllerApis and ConfigAdminManager)."""
    response = pb.AlterConfigsResponse()
    repeated = duplicates((r.resource.type, r.resource.name) for r in request.resources)
    for resource in request.resources:
        if (resource.resource.type, resource.resource.name) in repeated:
            continue
        result = response.results.add(resource=resource.resource)
        try:
            if duplicates(entry.name for entry in resource.configs):
                raise InvalidRequestError("Error due to duplicate config keys")
            if resource.resource.type != RESOURCE_TOPIC:
                raise InvalidRequestError(
                    "only topic configs can be altered; broker configs are read at start-up")
            topic = broker.topic(resource.resource.name)
            ops = [(entry.op, entry.name, entry.value) for entry in resource.configs]
            altered_configs(topic.configs, ops, broker.topic_defaults, resource.incremental)   # refused here first
            broker.alter_topic_config(topic.name, ops, resource.incremental, request.validate_only)
        except Exception as e:  # noqa: BLE001
            fill_error(result, e)
    for type_, name in repeated:
        result = response.results.add(resource=pb.ConfigResource(type=type_, name=name))
        fill_error(result, InvalidRequestError("Duplicate resource."))
    return response


def _text(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)
