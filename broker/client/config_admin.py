"""Config administration, mixed into :class:`~broker.client.admin.AdminClient` (confluent-kafka's
names): ``describe_configs``, ``alter_configs``, ``incremental_alter_configs``, and the
``ConfigResource``/``ConfigEntry`` they take and return.

    fs = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "orders")])
    fs[resource].result()["retention.ms"].value
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

from broker.client.admin_arguments import check_items, check_options
from broker.client.admin_fan_out import _error, _refused
from broker.client.model import _NamedEnum
from broker.errors import KafkaError
from broker.proto import riverlog_pb2 as pb


class ResourceType(enum.IntEnum):
    """What a ConfigResource names; Riverlog has configs for TOPIC and BROKER (the others are refused
    per resource by the broker, as a Kafka broker refuses a type it has no configs for)."""
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    BROKER = 4
    TRANSACTIONAL_ID = 5


class ConfigSource(_NamedEnum):
    """Where a config value comes from (confluent-kafka's values). confluent-kafka's
    ``ConfigEntry.source`` is librdkafka's int, so a source also equals that int (and converts
    to it): ``entry.source == CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG`` and ``ConfigSource(entry.source)``
    read as they do there. It equals the broker's name for it too, ``"DYNAMIC_TOPIC_CONFIG"``;
    it hashes as that name, so look an int up with ``==`` or ``int(entry.source)``, not ``in`` a set."""
    UNKNOWN_CONFIG = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    GROUP_CONFIG = 8

    def __eq__(self, other):
        if isinstance(other, int) and not isinstance(other, bool):
            return self.value == other
        return _NamedEnum.__eq__(self, other)

    __hash__ = _NamedEnum.__hash__

    def __int__(self):
        return self.value

    __index__ = __int__

    @classmethod
    def of(cls, name) -> "ConfigSource":
        """The source for a member, librdkafka's int or the broker's name (UNKNOWN_CONFIG otherwise)."""
        if isinstance(name, cls):
            return name
        if isinstance(name, int) and not isinstance(name, bool):
            return next((s for s in cls if s.value == name), cls.UNKNOWN_CONFIG)
        return cls.__members__.get(str(name), cls.UNKNOWN_CONFIG)


# confluent_kafka.admin's module constants (librdkafka's enum values, as plain ints).
CONFIG_SOURCE_UNKNOWN_CONFIG, CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG, CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG, \
    CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG, CONFIG_SOURCE_STATIC_BROKER_CONFIG, CONFIG_SOURCE_DEFAULT_CONFIG, \
    CONFIG_SOURCE_GROUP_CONFIG = (s.value for s in ConfigSource)
RESOURCE_UNKNOWN, RESOURCE_ANY, RESOURCE_TOPIC, RESOURCE_GROUP, RESOURCE_BROKER, RESOURCE_TRANSACTIONAL_ID = \
    (int(r) for r in ResourceType)


class AlterConfigOpType(enum.IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2     # add parts to a LIST config (cleanup.policy) that are not there yet
    SUBTRACT = 3   # remove parts from a LIST config


@dataclass(repr=False)
class ConfigEntry:
    """A described config, or an entry for ``incremental_alter_configs``, with confluent-kafka's
    arguments in its order (``name, value, source, is_read_only, is_default, is_sensitive,
    is_synonym, synonyms, incremental_operation``), so positional arguments mean the same;
    ``documentation`` (Kafka's, which confluent-kafka lacks) comes last. ``str(entry)`` is
    confluent-kafka's ``name="value"``."""
    name: str
    value: str | None
    source: ConfigSource = ConfigSource.UNKNOWN_CONFIG
    is_read_only: bool = False
    is_default: bool = False
    is_sensitive: bool = False
    is_synonym: bool = False
    synonyms: dict = field(default_factory=dict)
    incremental_operation: AlterConfigOpType | None = None
    documentation: str = ""

    def __post_init__(self):
        self.source = ConfigSource.of(self.source) if self.source != "" else ConfigSource.UNKNOWN_CONFIG

    def __repr__(self):
        return f'ConfigEntry({self.name}="{self.value}")'

    def __str__(self):
        return f'{self.name}="{self.value}"'


class ConfigResource:
    """A resource whose configs are described or altered (confluent-kafka's shape):
    ``set_config(name, value)`` fills ``set_config_dict`` for ``alter_configs``;
    ``add_incremental_config`` the entries of ``incremental_alter_configs``. ``ConfigResource.Type``
    is :class:`ResourceType`, as confluent-kafka names it (``ConfigResource.Type.TOPIC``)."""

    Type = ResourceType

    def __init__(self, restype, name: str, set_config: dict | None = None, described_configs=None, error=None,
                 incremental_configs: list | None = None):
        if isinstance(restype, str):
            try:
                restype = ResourceType[restype.upper()]
            except KeyError:
                raise ValueError(f'Unknown resource type "{restype}": should be a ResourceType value') from None
        elif isinstance(restype, int):
            restype = ResourceType(restype)
        if not isinstance(name, str):
            raise ValueError("Expected resource name to be a string")
        self.restype, self.name = restype, name
        self.set_config_dict = dict(set_config or {})
        self.configs, self.error = described_configs, error
        self.incremental_configs = list(incremental_configs or [])

    @property
    def restype_int(self) -> int:
        return int(self.restype)

    def set_config(self, name: str, value, overwrite: bool = True) -> None:
        if overwrite or name not in self.set_config_dict:
            self.set_config_dict[name] = value

    def add_incremental_config(self, entry: ConfigEntry) -> None:
        self.incremental_configs.append(entry)

    def __hash__(self):
        return hash((int(self.restype), self.name))

    def __eq__(self, other):
        return isinstance(other, ConfigResource) and (self.restype, self.name) == (other.restype, other.name)

    def __lt__(self, other):
        return (int(self.restype), self.name) < (int(other.restype), other.name)

    def __repr__(self):
        return f"ConfigResource({self.restype.name},{self.name})"


def _entry(e) -> ConfigEntry:
    """A described config; its ``synonyms`` as confluent-kafka gives them: a dict by name of
    ``is_synonym`` entries, most specific first (a later synonym of the same name, the default
    behind a broker setting, replaces the earlier one, as confluent-kafka's dict does)."""
    synonyms = {s.name: ConfigEntry(s.name, s.value, s.source, is_read_only=e.read_only,
                                    is_default=s.source == "DEFAULT_CONFIG", is_synonym=True) for s in e.synonyms}
    return ConfigEntry(e.name, e.value, e.source, is_read_only=e.read_only, is_default=e.is_default,
                       synonyms=synonyms, documentation=e.documentation)


def _duplicate_in(resources) -> str | None:
    """librdkafka's message for a repeated ConfigResource, or a ConfigEntry repeated within one."""
    seen = set()
    for r in resources:
        if (int(r.restype), r.name) in seen:
            return "Duplicate ConfigResource found"
        seen.add((int(r.restype), r.name))
        names = [c.name for c in r.incremental_configs]
        if len(set(names)) != len(names):
            return "Duplicate ConfigEntry found"
    return None


def _check_incremental(resources) -> None:
    """Each resource's ``incremental_configs`` as confluent-kafka's ``Admin_incremental_config_to_c``
    checks them before sending: a non-empty list (ValueError when empty) of ConfigEntry
    (TypeError), each with an ``AlterConfigOpType`` (TypeError: an entry without one is not read
    as SET), a str name (ValueError when empty) and, unless DELETE, a str value (TypeError: None
    would set the config to an empty string)."""
    for r in resources:
        entries = r.incremental_configs
        if not isinstance(entries, list):
            raise TypeError("expected list of ConfigEntry in incremental_configs field")
        if not entries:
            raise ValueError("expected non-empty list of ConfigEntry to alter incrementally in "
                             "incremental_configs field")
        for i, c in enumerate(entries):
            if not isinstance(c, ConfigEntry):
                raise TypeError(f"expected ConfigEntry type in incremental_configs field, index {i}")
            if not isinstance(c.incremental_operation, AlterConfigOpType):
                raise TypeError(f"Expected .incremental_operation to be AlterConfigOpType, not "
                                f"{type(c.incremental_operation).__name__} (index {i})")
            if not isinstance(c.name, str):
                raise TypeError(f"Expected .name to be str type, not {type(c.name).__name__}")
            if not c.name:
                raise ValueError(f'setting config entry "", index {i}, failed: Config name mustn\'t be empty')
            if c.incremental_operation != AlterConfigOpType.DELETE and not isinstance(c.value, str):
                raise TypeError(f"Expected .value to be str type, not {type(c.value).__name__}")


def _broker_target(resources) -> tuple[int | None, KafkaError | None]:
    """The broker a call naming a BROKER resource must be sent to (that broker answers for its own
    configs), as librdkafka's ``rd_kafka_ConfigResource_get_single_broker_id``: at most one BROKER
    resource per call (``_CONFLICT``), named by its node id (``_INVALID_ARG``). None: any broker."""
    target = None
    for r in resources:
        if r.restype != ResourceType.BROKER:
            continue
        if target is not None:
            return None, KafkaError(KafkaError._CONFLICT, "Only one ConfigResource of type BROKER is allowed per call")
        if not r.name.isdigit():
            return None, KafkaError(KafkaError._INVALID_ARG,
                                    f"Expected an int32 broker_id for ConfigResource(type=BROKER, name={r.name})")
        target = int(r.name)
    return target, None


class ConfigAdmin:
    """Needs ``self.cluster`` and ``self._fan_out`` (from AdminClient)."""

    def describe_configs(self, resources: list[ConfigResource], request_timeout: float | None = None):
        """Future per resource resolving to {name: ConfigEntry}. A BROKER resource is asked of that
        broker (one per call, named by its node id), as librdkafka sends it."""
        resources = check_items(resources, ConfigResource, "ConfigResource objects")
        check_options(False, request_timeout)
        node, refusal = _broker_target(resources)
        if refusal is not None:
            return _refused(resources, refusal.str(), refusal.code())
        request = pb.DescribeConfigsRequest(resources=[pb.ConfigResource(type=int(r.restype), name=r.name)
                                                       for r in resources])
        by_key = {(int(r.restype), r.name): r for r in resources}

        def split(response):
            for res in response.results:
                key = by_key.get((res.resource.type, res.resource.name))
                if res.error_code:
                    yield key, _error(res.error_code, res.error_message)
                else:
                    yield key, {e.name: _entry(e) for e in res.entries}

        return self._fan_out(resources, lambda: self._config_call("DescribeConfigs", request, node, request_timeout),
                             split)

    def _config_call(self, method: str, request, node: int | None, request_timeout):
        if node is None:
            return self.cluster.call_any(method, request, request_timeout)
        return self.cluster.call(method, request, node, request_timeout)

    def alter_configs(self, resources: list[ConfigResource], validate_only: bool = False,
                      request_timeout: float | None = None):
        """Replace each resource's overrides with its ``set_config_dict`` (unlisted keys return to defaults)."""
        return self._alter(resources, validate_only, False, request_timeout)

    def incremental_alter_configs(self, resources: list[ConfigResource], validate_only: bool = False,
                                  request_timeout: float | None = None):
        """Apply each resource's ``incremental_configs`` (SET, DELETE, or APPEND/SUBTRACT on a LIST
        config such as cleanup.policy) and keep other overrides. As librdkafka's
        ``rd_kafka_IncrementalAlterConfigs``, a resource listed twice or a config named twice in
        one resource fails every future with ``_INVALID_ARG`` and sends nothing. The entries are
        checked first as confluent-kafka checks them (see ``_check_incremental``)."""
        resources = check_items(resources, ConfigResource, "ConfigResource objects", TypeError)
        check_options(validate_only, request_timeout)
        _check_incremental(resources)
        duplicate = _duplicate_in(resources)
        if duplicate is not None:
            return _refused(resources, duplicate)
        return self._alter(resources, validate_only, True, request_timeout)

    def _alter(self, resources, validate_only, incremental, request_timeout):
        resources = check_items(resources, ConfigResource, "ConfigResource objects")
        check_options(validate_only, request_timeout)
        node, refusal = _broker_target(resources)
        if refusal is not None:
            return _refused(resources, refusal.str(), refusal.code())
        request = pb.AlterConfigsRequest(validate_only=validate_only)
        by_key = {}
        for r in resources:
            by_key[(int(r.restype), r.name)] = r
            entry = request.resources.add(resource=pb.ConfigResource(type=int(r.restype), name=r.name),
                                          incremental=incremental)
            if incremental:
                for c in r.incremental_configs:
                    entry.configs.add(name=c.name, value=c.value if isinstance(c.value, str) else "",
                                      op=int(c.incremental_operation))
            else:
                for k, v in r.set_config_dict.items():
                    entry.configs.add(name=k, value=str(v), op=0)

        def split(response):
            for res in response.results:
                key = by_key.get((res.resource.type, res.resource.name))
                yield key, _error(res.error_code, res.error_message) if res.error_code else None

        return self._fan_out(resources, lambda: self._config_call("AlterConfigs", request, node, request_timeout),
                             split)
