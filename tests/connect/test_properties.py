"""Java's .properties format as java.util.Properties.load reads it, and connector files in JSON or properties."""
from __future__ import annotations

import json

import pytest

from connect.errors import ConfigError
from connect.properties import connector_file, parse_properties

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("text, expected", [
    ("a=1\nb = 2\n", {"a": "1", "b": "2"}),
    ("# comment\n! also\n\n  key : value ", {"key": "value "}),
    ("key value with spaces", {"key": "value with spaces"}),
    ("a=1\na=2", {"a": "2"}),
    ("list=one,\\\n     two,\\\n  three", {"list": "one,two,three"}),
    ("path=C:\\\\tmp\\\\x", {"path": "C:\\tmp\\x"}),
    ("k\\=ey=v\\tx", {"k=ey": "v\tx"}),
    ("uni=\\u00e9t\\u00E9", {"uni": "été"}),
    ("empty=", {"empty": ""}),
    ("alone", {"alone": ""}),
    ("trailing=even\\\\\nnext=1", {"trailing": "even\\", "next": "1"}),
    ("transforms.mask.fields=ssn\ntransforms=mask", {"transforms.mask.fields": "ssn", "transforms": "mask"}),
])
def test_properties_as_java_reads_them(text, expected):
    assert parse_properties(text) == expected


def test_connector_files_in_both_formats(tmp_path):
    j = tmp_path / "source.json"
    j.write_text(json.dumps({"name": "src", "config": {"connector.class": "FileStreamSource", "tasks.max": "1"}}))
    assert connector_file(str(j)) == ("src", {"connector.class": "FileStreamSource", "tasks.max": "1", "name": "src"},
                                      None)          # no initial_state: Kafka writes no target state
    stopped = tmp_path / "stopped.json"                 # KIP-980: created STOPPED, to set its offsets first
    stopped.write_text(json.dumps({"name": "s", "config": {"connector.class": "FileStreamSource"},
                                   "initial_state": "stopped"}))
    assert connector_file(str(stopped)) == ("s", {"connector.class": "FileStreamSource", "name": "s"}, "STOPPED")
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps({"name": "f", "connector.class": "FileStreamSink"}))
    assert connector_file(str(flat)) == ("f", {"name": "f", "connector.class": "FileStreamSink"}, None)
    p = tmp_path / "sink.properties"
    p.write_text("name=sink\nconnector.class=FileStreamSink\ntopics=a,b\n")
    assert connector_file(str(p)) == ("sink", {"name": "sink", "connector.class": "FileStreamSink", "topics": "a,b"},
                                      None)


@pytest.mark.parametrize("content, problem", [
    ('{"config": {"connector.class": "X"}}', "names no connector"),
    ('{"name": "a", "config": {"name": "b"}}', "doesn't match"),
    ("{not json", "not valid JSON"),
    ("[1, 2]", "expected a JSON object"),
    ('{"name": "a", "config": {}, "initial_state": "DESTROYED"}', "initial_state"),
    ("connector.class=X\n", "names no connector"),
])
def test_a_bad_connector_file_is_refused_naming_the_problem(tmp_path, content, problem):
    path = tmp_path / ("c.json" if content.lstrip()[:1] in "{[" else "c.properties")
    path.write_text(content)
    with pytest.raises(ConfigError, match=problem):
        connector_file(str(path))
