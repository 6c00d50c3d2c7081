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
from connect.config_def import Plugin, PluginRegistry


def _simple(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _register_all() -> None:
    from connect import converters, predicates, transforms
    for name, cls in converters.CONVERTERS.items():
        defs = JSON_CONVERTER_CONFIG if name == converters.JSON_CONVERTER else None
        CONVERTERS.register(Plugin(name, defs, None, cls), [_simple(name)])
    HEADER_CONVERTERS.register(Plugin("org.apache.kafka.connect.storage.SimpleHeaderConverter"),
                               ["SimpleHeaderConverter"])
    HEADER_CONVERTERS.register(Plugin(converters.BYTE_ARRAY_CONVERTER), [_simple(converters.BYTE_ARRAY_CONVERTER)])
    for name, cls in transforms.TRANSFORMS.items():
        TRANSFORMATIONS.register(Plugin(name, None, None, cls), [_simple(name)])
    for name, cls in predicates.PREDICATES.items():
        PREDICATES.register(Plugin(name, None, None, cls), [_simple(name)])
    from connect import directory_sink, file_stream, topic_copy  # noqa: F401  (they register themselves)


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


_register_all()

__all__ = ["canonical", "canonical_transform_config"]
