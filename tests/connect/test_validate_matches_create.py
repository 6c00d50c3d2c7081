"""``PUT /connector-plugins/{plugin}/config/validate`` lists every problem ``POST /connectors``
refuses a config for, as Kafka's two run the same ``validateConnectorConfig``: the transforms' own
settings and a connector's checks across keys included, in ``error_count`` and per field."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

import connect.plugins  # noqa: F401  (registers the built-in plugins)
from connect.errors import ConfigError
from connect.plugins import check_connector_config
from connect.worker_config import WorkerConfig
from connect.worker_connector_configs import WorkerConnectorConfigs

pytestmark = pytest.mark.unit

CONFIGS = {
    # a transform missing its required setting, and one with a bad setting
    "FileStreamSink": [{"topics": "t", "file": "/tmp/o", "transforms": "m", "transforms.m.type": "MaskField$Value"},
                       {"topics": "t", "file": "/tmp/o", "transforms": "c", "transforms.c.type": "Cast$Value",
                        "transforms.c.spec": "a:nosuch"}],
    # DeltaSink's checks across keys: its converters, its two paths
    "DeltaSink": [{"topics": "t", "delta.table.path": "/tmp/x", "value.converter": "JsonConverter"},
                  {"topics": "t", "delta.table.path": "/tmp/x", "delta.root.path": "/tmp/y"}],
    "TopicCopy": [{"topics": "a", "topics.regex": "b"}],
}


WORKER = SimpleNamespace(config=WorkerConfig.parse({"bootstrap.servers": "127.0.0.1:9092", "group.id": "c"}))


def _validate(plugin: str, config: dict) -> dict:
    return WorkerConnectorConfigs.validate(WORKER, plugin, config)   # PUT .../config/validate


def _errors(response: dict) -> dict[str, list[str]]:
    return {c["value"]["name"]: c["value"]["errors"] for c in response["configs"]
            if c["value"] is not None and c["value"]["errors"]}


@pytest.mark.parametrize("plugin,config", [(p, c) for p, cs in CONFIGS.items() for c in cs])
def test_validate_names_every_problem_a_create_refuses(plugin, config):
    with pytest.raises(ConfigError) as refused:
        check_connector_config("x", {"connector.class": plugin, **config})
    answered = _validate(plugin, {"name": "x", **config})
    assert answered["error_count"] == sum(len(v) for v in refused.value.details["errors"].values())
    assert _errors(answered) == refused.value.details["errors"]


def test_a_config_a_create_accepts_has_no_errors():
    config = {"name": "x", "topics": "t", "delta.table.path": "/tmp/x", "transforms": "m",
              "transforms.m.type": "MaskField$Value", "transforms.m.fields": "card"}
    check_connector_config("x", {"connector.class": "DeltaSink", **config})
    assert _validate("DeltaSink", config)["error_count"] == 0
