"""JSON numbers and booleans in a connector config become the text Kafka's Jackson mapping gives a
``Map<String, String>``: ``true``/``false`` and a number as written (``1.50``, ``1e3``), whether
the config comes through ``POST``/``PUT``/``PATCH``, a ``connect standalone`` JSON file or
``Worker.create_connector`` in Python. A transform's ``static.value: true`` is written into the
records as this text, so ``True`` or ``1.5`` would change the data."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from connect.errors import ConfigError
from connect.plugins import check_connector_config
from connect.properties import connector_file
from connect.rest import RestServer

pytestmark = pytest.mark.unit

_BODY = ('{"connector.class": "FileStreamSource", "file": "/tmp/in.txt", "topic": "t", "tasks.max": 1,'
         ' "errors.log.enable": true, "transforms": "tag", "transforms.tag.type": "InsertField$Value",'
         ' "transforms.tag.static.field": "price", "transforms.tag.static.value": 1.50,'
         ' "value.converter.schemas.enable": false, "x.big": 1e3}')
_TEXT = {"tasks.max": "1", "errors.log.enable": "true", "transforms.tag.static.value": "1.50",
         "value.converter.schemas.enable": "false", "x.big": "1e3"}


def _send(server: RestServer, method: str, path: str, body: str) -> tuple[int, dict]:
    """The raw JSON text as curl's ``-d`` sends it (no client re-encodes the numbers)."""
    request = urllib.request.Request(server.url + path, data=body.encode(), method=method)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.fixture(scope="module")
def rest():
    worker = _Recorder()
    with RestServer(worker, "127.0.0.1", 0) as server:
        yield worker, server


class _Recorder:
    """The worker methods the config routes call, recording the config they were handed."""

    def __init__(self):
        self.seen: dict | None = None

    def create_connector(self, name, config, initial_state=None):
        self.seen = dict(config)
        return {"name": name, "config": self.seen, "tasks": [], "type": "source"}

    def put_connector_config(self, name, config):
        self.seen = dict(config)
        return True, {"name": name, "config": self.seen, "tasks": [], "type": "source"}

    def patch_connector_config(self, name, patch):
        self.seen = dict(patch)
        return {"name": name, "config": self.seen, "tasks": [], "type": "source"}


@pytest.mark.parametrize("method, path, body", [
    ("POST", "/connectors", '{"name": "c", "config": ' + _BODY + '}'),
    ("PUT", "/connectors/c/config", _BODY),
    ("PATCH", "/connectors/c/config", _BODY),
])
def test_rest_config_numbers_and_booleans_keep_their_json_text(rest, method, path, body):
    worker, server = rest
    worker.seen = None
    status, answer = _send(server, method, path, body)
    assert status in (200, 201), answer
    assert {k: worker.seen[k] for k in _TEXT} == _TEXT


def test_standalone_json_file_values_keep_their_json_text(tmp_path):
    path = tmp_path / "c.json"
    path.write_text('{"name": "c", "config": ' + _BODY + '}')
    name, config, _ = connector_file(str(path))
    assert name == "c"
    assert {k: config[k] for k in _TEXT} == _TEXT
    flat = tmp_path / "flat.json"                       # a flat config with its name
    flat.write_text(_BODY[:-1] + ', "name": "f"}')
    assert {k: connector_file(str(flat))[1][k] for k in _TEXT} == _TEXT


def test_python_config_booleans_are_stored_as_java_writes_them():
    props = check_connector_config("c", {"connector.class": "FileStreamSource", "file": "/tmp/in.txt", "topic": "t",
                                         "tasks.max": 2, "errors.log.enable": True,
                                         "value.converter.schemas.enable": False})
    assert (props["tasks.max"], props["errors.log.enable"], props["value.converter.schemas.enable"]) == \
        ("2", "true", "false")


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_non_standard_numbers_are_refused_as_jacksons_reader_refuses_them(rest, token, tmp_path):
    worker, server = rest
    worker.seen = None
    body = '{"name": "c", "config": {"connector.class": "FileStreamSource", "x": ' + token + '}}'
    status, answer = _send(server, "POST", "/connectors", body)
    assert (status, worker.seen) == (500, None)
    assert "Non-standard token" in answer["message"]
    path = tmp_path / "c.json"
    path.write_text(body)
    with pytest.raises(ConfigError, match="Non-standard token"):
        connector_file(str(path))
