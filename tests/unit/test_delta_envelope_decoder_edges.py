"""Guard: the envelope decoder's remembered-schema path reads the edge inputs a whole
``json.loads`` reads differently from plain JSON exactly as ``json.loads`` does: NaN/Infinity,
nesting deeper than the recursion limit, a repeated ``payload`` key (the last counts), and tails
JSON whitespace does not include (NUL, NBSP, form feed, a trailing BOM)."""
from __future__ import annotations

import json

import pytest

from spark_sink.delta.envelope import EnvelopeDecoder

pytestmark = pytest.mark.unit

SCHEMA = b'{"type":"struct","fields":[{"field":"a","type":"int32"}]}'
HEAD = b'{"schema":' + SCHEMA + b',"payload":'
EDGES = [HEAD + b'{"a":NaN}}', HEAD + b'{"a":-Infinity}}', HEAD + b'{"a":1e400}}',
         HEAD + b'[' * 100_000 + b']' * 100_000 + b'}',
         HEAD + b'{"a":1},"payload":{"a":2}}', HEAD + b'{"a":1}}\x00', HEAD + b'{"a":1}}\xc2\xa0',
         HEAD + b'{"a":1}}\x0c', HEAD + b'{"a":1}}\xef\xbb\xbf', HEAD + b'{"a":"\xed\xa0\x80"}}']


def _outcome(decode, raw):
    try:
        return "ok", repr(decode(raw))   # repr: NaN is not equal to itself
    except Exception as e:   # noqa: BLE001 - the kind of error must match
        return "error", type(e).__name__


def _reference(raw):
    doc = json.loads(raw)
    return (doc["schema"], doc["payload"]) if isinstance(doc, dict) and set(doc) == {"schema", "payload"} \
        else (None, doc)


@pytest.mark.parametrize("raw", EDGES, ids=range(len(EDGES)))
def test_a_remembered_layout_reads_edge_inputs_as_json_loads(raw):
    decoder = EnvelopeDecoder()
    decoder.decode(HEAD + b'{"a":0}}')   # the layout is remembered: the edge takes the short path
    assert _outcome(decoder.decode, raw) == _outcome(_reference, raw)
