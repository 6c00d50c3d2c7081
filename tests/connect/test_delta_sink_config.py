"""The DeltaSink connector's config, without Spark: the issue's config accepted under its alias and
class name, bad values refused at POST naming the field (the path and converter rules that join
keys included), and the default application transaction id."""
from __future__ import annotations

import pytest

pytestmark = pytest.mark.unit

ISSUE = {"connector.class": "DeltaSink", "topics": "shop.public.customers", "delta.table.path": "/lake/customers",
         "primary.key.fields": "id", "scd.type": "2", "errors.tolerance": "all",
         "errors.deadletterqueue.topic.name": "dlq.customers"}


def build(config: dict, name: str = "customers-to-delta"):
    from connect.config import parse_connector_config
    from connect.connector import ConnectorContext, connector_class
    from connect.plugins import check_connector_config
    parsed = parse_connector_config(check_connector_config(name, config))
    return connector_class(parsed.connector_class)(parsed, ConnectorContext(None, "127.0.0.1:9092"))


def problems(config: dict) -> dict:
    from connect.errors import ConfigError
    with pytest.raises(ConfigError) as e:
        build(config)
    return e.value.details["errors"]


def test_the_issues_config_becomes_delta_apply_settings():
    sink = build(ISSUE)
    assert sink.kind == "sink" and sink.bytes_in_bytes_out
    assert {k: sink.settings[k] for k in ("delta.table.path", "primary.key.fields", "scd.type", "errors.tolerance",
                                          "delta.mode")} == {"delta.table.path": "/lake/customers",
                                                             "primary.key.fields": "id", "scd.type": "2",
                                                             "errors.tolerance": "all", "delta.mode": "cdc"}
    assert sink.app_id("q-1") == "connect-customers-to-delta.q-1"
    assert build({**ISSUE, "delta.app.id": "mine"}).app_id("q-1") == "mine"
    full = build({**ISSUE, "connector.class": "io.riverlog.connect.delta.DeltaSinkConnector"})
    assert type(full) is type(sink)


def test_bad_values_are_refused_naming_the_field():
    assert list(problems({**ISSUE, "scd.type": "3"})) == ["scd.type"]
    assert "delta.table.path" in problems({**ISSUE, "delta.root.path": "/lake"})        # both paths
    assert "delta.table.path" in problems({k: v for k, v in ISSUE.items() if k != "delta.table.path"})
    assert list(problems({**ISSUE, "value.converter": "JsonConverter"})) == ["value.converter"]
    assert "delta.table.path" in problems({**ISSUE, "delta.mode": "append", "delta.table.path": "",
                                           "delta.root.path": "/lake"})
    build({**ISSUE, "key.converter": "StringConverter"})   # text is bytes to the sink


def test_the_rules_that_join_keys_are_checked_at_post():
    from connect.errors import ConfigError
    from connect.plugins import check_connector_config
    with pytest.raises(ConfigError) as e:
        check_connector_config("c", {**ISSUE, "delta.root.path": "/lake", "value.converter": "JsonConverter"})
    assert set(e.value.details["errors"]) == {"delta.table.path", "value.converter"}
    assert "2 error(s)" in str(e.value)


def test_listed_among_the_plugins_with_its_config_keys():
    from connect.plugins import plugin_config_keys, plugin_list
    assert {"class": "io.riverlog.connect.delta.DeltaSinkConnector", "type": "sink"}.items() <= next(
        p for p in plugin_list() if p["class"].endswith("DeltaSinkConnector")).items()
    names = [k["name"] for k in plugin_config_keys("DeltaSink")]
    assert {"topics", "topics.regex", "delta.table.path", "delta.root.path", "primary.key.fields",
            "scd.type"} <= set(names)
