"""The Delta sink's envelope decoder (schema parsed once per layout) reads every record as
``json.loads`` and the ``{"schema", "payload"}`` check do, errors included, over random envelopes
in random layouts; the headers read from Arrow are those ``to_pylist`` gives; the converters'
shortcuts convert as the general placeholder test does."""
from __future__ import annotations

import json

import pyarrow as pa
from hypothesis import given, settings, strategies as st

from spark_sink.delta.arrow_rows import header_pairs
from spark_sink.delta.envelope import EnvelopeDecoder
from spark_sink.delta.schema import _converter, _converter_with, converter, toast_test


def reference(raw):
    """What the sink read before the decoder: one ``json.loads`` per record."""
    doc = json.loads(raw)
    if isinstance(doc, dict) and set(doc) == {"schema", "payload"}:
        return doc["schema"], doc["payload"]
    return None, doc


def outcome(decode, raw):
    try:
        return "ok", decode(raw)
    except Exception as e:   # noqa: BLE001 - the kind of error is part of what must match
        return "error", type(e).__name__, str(e)


scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.text(max_size=6),
                    st.floats(allow_nan=False), st.sampled_from(["__debezium_unavailable_value", "é\u2028", "\ud800"]))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                      st.dictionaries(st.text(max_size=4), inner, max_size=3)),
                      max_leaves=8)
FIELDS = [{"type": "struct", "fields": [{"type": "int32", "field": "id"}, {"type": "string", "field": "name"}],
           "field": "after"}, {"type": "string", "field": "op"}]
schemas = st.one_of(st.sampled_from([{"type": "struct", "fields": FIELDS, "name": "a.Envelope"},
                                     {"type": "struct", "fields": FIELDS[:1], "name": "b.Envelope"}]), values)
WS = st.sampled_from(["", " ", "\n", " \t\r\n"])


@st.composite
def records(draw, schemas_seen):
    """One record's bytes: an envelope in a random layout, often with a schema seen before, or
    text that only looks like one (extra or repeated keys, a broken tail, bad bytes)."""
    schema = draw(st.sampled_from(schemas_seen)) if schemas_seen and draw(st.booleans()) else draw(schemas)
    schemas_seen.append(schema)
    payload = draw(values)
    sep = draw(st.sampled_from([(",", ":"), (", ", ": ")]))
    s, p = json.dumps(schema, separators=sep), json.dumps(payload, separators=sep, ensure_ascii=draw(st.booleans()))
    w = [draw(WS) for _ in range(6)]
    layout = draw(st.sampled_from(["envelope"] * 6 + ["payload_first", "extra_key", "repeated_schema", "bare",
                                                       "tail_garbage", "no_brace", "bad_utf8", "two_values", "str"]))
    text = f'{{{w[0]}"schema"{w[1]}:{w[2]}{s}{w[3]},{w[4]}"payload"{w[5]}:{p}{draw(WS)}}}{draw(WS)}'
    if layout == "payload_first":
        text = f'{{"payload":{p},"schema":{s}}}'
    elif layout == "extra_key":
        text = text[:text.rindex("}")] + ',"x":1}'
    elif layout == "repeated_schema":
        text = text[:text.rindex("}")] + ',"schema":3}'
    elif layout == "bare":
        text = p
    elif layout == "tail_garbage":
        text += draw(st.sampled_from(["x", "}", ",", "]"]))
    elif layout == "no_brace":
        text = text[:text.rindex("}")]
    elif layout == "two_values":
        text = text[:text.rindex("}")] + " 1}"
    raw = text.encode("utf-8", "surrogatepass")
    if layout == "bad_utf8":
        raw = raw[:-1] + b"\xff}"
    return text if layout == "str" else raw


@settings(max_examples=120, deadline=None, database=None, derandomize=True)
@given(st.data())
def test_the_decoder_reads_every_record_as_json_loads_does(data):
    seen: list = []
    decoder = EnvelopeDecoder()
    for _ in range(data.draw(st.integers(1, 8))):
        raw = data.draw(records(seen))
        want, got = outcome(reference, raw), outcome(decoder.decode, raw)
        assert got == want, raw


def test_a_remembered_schema_is_shared_and_the_payload_still_read_per_record():
    decoder = EnvelopeDecoder()
    schema = {"type": "struct", "fields": FIELDS}
    first = decoder.decode(json.dumps({"schema": schema, "payload": {"op": "c"}}).encode())
    second = decoder.decode(json.dumps({"schema": schema, "payload": {"op": "u"}}).encode())
    assert first == (schema, {"op": "c"}) and second == (schema, {"op": "u"})
    assert decoder._prefixes and second[0] is next(iter(decoder._prefixes.values()))
    # the same prefix followed by more than the payload and its brace is read whole
    text = json.dumps({"schema": schema, "payload": {"op": "d"}})
    assert decoder.decode((text[:-1] + ', "schema": 1}').encode()) == (1, {"op": "d"})


HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
headers = st.one_of(st.none(), st.lists(st.fixed_dictionaries(
    {"key": st.one_of(st.none(), st.sampled_from(["riverlog.cdc.order", "a", "é"])),
     "value": st.one_of(st.none(), st.binary(max_size=3))}), max_size=3))


@settings(max_examples=200, deadline=None, database=None, derandomize=True)
@given(st.lists(headers, max_size=8), st.data())
def test_header_pairs_are_the_rows_headers_in_order_whatever_the_chunks_and_slices(rows, data):
    array = pa.array(rows, type=HEADERS)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(rows)), max_size=3)))
    bounds = [0, *cuts, len(rows)]
    column = pa.chunked_array([array.slice(a, b - a) for a, b in zip(bounds, bounds[1:])], type=HEADERS)
    want = [tuple((h["key"], h["value"]) for h in r or ()) for r in column.to_pylist()]
    assert header_pairs(column) == want


@settings(max_examples=150, deadline=None, database=None, derandomize=True)
@given(st.sampled_from([{"type": "int32"}, {"type": "int64"}, {"type": "string"}, None, {"type": "boolean"}]),
       st.sampled_from(["__debezium_unavailable_value", "hex:00ff", "x"]),
       st.one_of(values, st.sampled_from(["__debezium_unavailable_value", "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==",
                                         "x", "eA==", [120], ["x"], {"x": "x"}, True, 1.0])))
def test_the_converters_shortcuts_convert_as_the_general_test_does(schema, placeholder, value):
    """An int or str takes a shortcut past the placeholder test; every value converts as before."""
    general = _converter_with(toast_test(placeholder), _converter(schema) if schema is not None else (lambda v: v))
    assert outcome(converter(schema, placeholder), value) == outcome(general, value)
