"""Worker keys whose feature Riverlog does not have are refused when the worker starts, not
ignored: ``config.providers`` (a ``${file:...}`` reference would reach a connector as its literal
text) and ``rest.extension.classes`` (Kafka's REST extensions, e.g. basic authentication: the REST
API would answer without the protection asked for)."""
from __future__ import annotations

import pytest

from connect.errors import ConfigError
from connect.worker_config import WorkerConfig

pytestmark = pytest.mark.unit

WORKER = {"bootstrap.servers": "127.0.0.1:9092", "group.id": "connect"}


@pytest.mark.parametrize("key, value", [
    ("config.providers", "file"),
    ("rest.extension.classes", "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension"),
])
def test_a_feature_riverlog_lacks_is_refused_naming_the_key(key, value):
    with pytest.raises(ConfigError) as refused:
        WorkerConfig.parse({**WORKER, key: value})
    assert list(refused.value.details["errors"]) == [key]


def test_left_empty_they_are_accepted_as_kafkas_defaults():
    assert WorkerConfig.parse({**WORKER, "config.providers": "", "rest.extension.classes": " "}).group_id == "connect"
