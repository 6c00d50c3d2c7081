"""The built-in plugins, registered in :mod:`connect.config`'s registries under Kafka's class names
and their simple names (Kafka's plugin aliases: ``JsonConverter``, ``InsertField$Value``,
``FileStreamSource``), and the helpers the worker builds a pipeline with.

Importing this module is what makes ``validate`` know every converter, transform, predicate and
connector shipped with Riverlog; connectors from other packages register themselves with
:func:`connect.connector.register_connector`.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connect.config import CONVERTERS, HEADER_CONVERTERS, JSON_CONVERTER_CONFIG, PREDICATES, TRANSFORMATIONS
from connect.config_def import ConfigDef, Plugin, PluginRegistry


def _simple(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _register_all() -> None:
    from connect import converters, predicates, transforms
    from connect.connector_config_def import BYTE_ARRAY_CONVERTER_CONFIG, STRING_CONVERTER_CONFIG
    defs = {converters.JSON_CONVERTER: JSON_CONVERTER_CONFIG, converters.STRING_CONVERTER: STRING_CONVERTER_CONFIG,
            converters.BYTE_ARRAY_CONVERTER: BYTE_ARRAY_CONVERTER_CONFIG}        # each one's Converter.config()
    for name, cls in converters.CONVERTERS.items():
        CONVERTERS.register(Plugin(name, defs.get(name), None, cls), [_simple(name)])
    HEADER_CONVERTERS.register(Plugin("org.apache.kafka.connect.storage.SimpleHeaderConverter", ConfigDef([])),
                               ["SimpleHeaderConverter"])
    HEADER_CONVERTERS.register(Plugin(converters.BYTE_ARRAY_CONVERTER, BYTE_ARRAY_CONVERTER_CONFIG),
                               [_simple(converters.BYTE_ARRAY_CONVERTER)])
    for name, cls in transforms.TRANSFORMS.items():
        TRANSFORMATIONS.register(Plugin(name, None, None, cls), [_simple(name)])
    for name, cls in predicates.PREDICATES.items():
        PREDICATES.register(Plugin(name, None, None, cls), [_simple(name)])
    from connect import delta_sink, directory_sink, file_stream, topic_copy  # noqa: F401  (they register themselves)
    from connect import postgres_cdc_source  # noqa: F401  (registers itself)


def canonical(registry: PluginRegistry, name: str | None) -> str | None:
    """The class name an alias stands for (the name itself when unknown)."""
    if name is None:
        return None
    plugin = registry.get(name.strip())
    return plugin.class_name if plugin is not None else name.strip()


def canonical_transform_config(props: Mapping[str, Any]) -> dict[str, Any]:
    """``transforms.<a>.type`` and ``predicates.<a>.type`` with aliases replaced by class names, as
    :func:`connect.transforms.from_connector_config` looks classes up by their full names."""
    out = dict(props)
    for key, value in props.items():
        if key.endswith(".type") and isinstance(value, str):
            if key.startswith("transforms."):
                out[key] = canonical(TRANSFORMATIONS, value)
            elif key.startswith("predicates."):
                out[key] = canonical(PREDICATES, value)
    return out


def check_connector_config(name: str, config: Mapping[str, Any], override_policy: str = "All") -> dict[str, str]:
    """A connector config as ``POST /connectors`` accepts it (``name`` filled in, values as
    strings), or :class:`~connect.errors.ConfigError` naming every bad field, the transforms' own
    settings included, with Connect's validate response in ``details["infos"]``. Client overrides
    are checked under the worker's ``connector.client.config.override.policy``."""
    from connect.config_infos import refusal
    from connect.connector import connector_class
    from connect.errors import BadRequestError
    from connect.java_text import config_text
    props = {str(k): v for k, v in config.items()}
    if props.get("name") not in (None, name):
        raise BadRequestError(f"Connector name configuration ({props['name']}) doesn't match connector name "
                              f"in the URL ({name})")
    props["name"] = name
    infos, errors = _checked(props, override_policy)
    if errors or connector_class(str(props.get("connector.class", ""))) is None:
        e = refusal(errors)
        e.details["infos"] = infos.to_json()
        raise e
    return {k: ("" if v is None else str(config_text(v))) for k, v in props.items()}


def validate_connector_config(config: Mapping[str, Any], override_policy: str = "All"):
    """``PUT /connector-plugins/{plugin}/config/validate``: Connect's validate response with every
    problem a create refuses, as Kafka's validate and create run one ``validateConnectorConfig``."""
    return _checked({str(k): v for k, v in config.items()}, override_policy)[0]


def _checked(props: dict[str, Any], override_policy: str = "All"):
    """``validate``'s per-key checks, then the transforms' own settings (which ``validate`` does not
    define) and the connector's checks across keys: the validate response holding them all, and
    every bad field with its messages (``validate``'s first)."""
    from connect.config import validate
    from connect.connector import connector_class
    from connect.errors import ConfigError
    from connect.transforms import from_connector_config
    infos = validate(props, override_policy=override_policy)
    errors = infos.errors()
    found: dict[str, list[str]] = {}
    try:
        from_connector_config(canonical_transform_config(props))
    except ConfigError as e:  # the transforms' own settings, which validate() does not define
        for field, problems in e.details.get("errors", {}).items():
            if field not in errors:   # a field validate() named keeps its messages
                found[field] = list(problems)
    cls = connector_class(str(props.get("connector.class", "")))
    if cls is not None:
        for field, problems in cls.problems(props).items():
            found.setdefault(field, []).extend(p for p in problems if p not in errors.get(field, []))
    for field, problems in found.items():
        errors.setdefault(field, []).extend(p for p in problems if p not in errors.get(field, []))
        infos.add_errors(field, props.get(field), problems)
    return infos, errors


def plugin_list(connectors_only: bool = True) -> list[dict]:
    """``GET /connector-plugins`` (``?connectorsOnly=false`` adds transforms, predicates, converters)."""
    from connect.config import CONNECTORS
    from connect.connector import Connector, connector_class
    out = []
    for name in CONNECTORS.class_names():
        cls = connector_class(name)
        out.append({"class": name, "type": cls.kind if cls else "unknown", "version": Connector.version})
    # ConnectorPluginsResource's order: the sink connectors, then the source connectors (each by name)
    out.sort(key=lambda p: {"sink": 0, "source": 1}.get(p["type"], 2))
    if not connectors_only:
        for registry, kind in ((TRANSFORMATIONS, "transformation"), (PREDICATES, "predicate"),
                               (CONVERTERS, "converter"), (HEADER_CONVERTERS, "header_converter")):
            out += [{"class": n, "type": kind, "version": Connector.version} for n in registry.class_names()]
    return out


def plugin_config_keys(plugin: str) -> list[dict]:
    """``GET /connector-plugins/{plugin}/config``: the plugin's ConfigKeyInfo list (a connector's
    own keys first, then the common source or sink keys it does not define, as Kafka 3.5+ lists
    them)."""
    from connect.config import connector_config_def
    from connect.connector import connector_class
    from connect.errors import NotFoundError
    cls = connector_class(plugin)
    if cls is not None:
        own = dict(cls.config_def.keys)
        keys = list(own.values()) + [k for n, k in connector_config_def(cls.kind).keys.items() if n not in own]
        return [k.definition() for k in keys]
    for registry in (TRANSFORMATIONS, PREDICATES, CONVERTERS, HEADER_CONVERTERS):
        found = registry.get(plugin)
        if found is None:
            continue
        if found.config_def is not None:
            return [k.definition() for k in found.config_def.keys.values()]
        return [_setting_definition(s) for s in getattr(found.target, "SETTINGS", [])]
    raise NotFoundError(f"Unknown plugin {plugin}.")


def _setting_definition(setting) -> dict:
    """A transform's or predicate's setting as Kafka's ``ConfigKeyInfo``: the default written as
    ``ConfigDef.convertToString`` writes it (``true``, ``a,b``), none when the setting is required."""
    from connect.config_def import NO_DEFAULT, ConfigKey
    from connect.transform_base import REQUIRED
    default = NO_DEFAULT if setting.default is REQUIRED else setting.default
    return ConfigKey(setting.name, setting.type.upper(), default, None, documentation=setting.doc).definition()


_register_all()

__all__ = ["canonical", "canonical_transform_config", "check_connector_config", "plugin_config_keys", "plugin_list",
           "validate_connector_config"]
