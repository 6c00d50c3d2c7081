"""The batch a sink's JSON type is learnt from is read through the type's carried form (see
``Pipeline._converters``), so its plan is the one every later batch moves onto: that batch must read
exactly as the bound form reads it — the same values, the same flagged records — and none of its
records may be a misfit (that would ask for a rebind of the very batch the type came from)."""
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from connect import record_frame
from connect.converters import JsonConverter, decode
from connect.errors import DataError

pytestmark = pytest.mark.spark


def source(spark, values):
    rows = [("orders", 0, i, None, None, v, []) for i, v in enumerate(values)]
    return record_frame.from_source(spark.createDataFrame(rows, "topic string, partition int, offset long, "
                                    "timestamp timestamp, key binary, value binary, "
                                    "headers array<struct<key string, value binary>>"))


def read(frame, conv):
    out = decode(frame, conv, "value").select("offset", F.to_json(F.struct("value")).alias("v"),
                                              F.col(record_frame.ERROR).alias("e"))
    return [(r.offset, r.v, r.e and (r.e.stage, r.e["class"], r.e.message)) for r in out.orderBy("offset").collect()]


def both_forms(spark, values):
    f = source(spark, values)
    bound = JsonConverter({"schemas.enable": "false"}).bind(f)
    assert bound.fits_own_batch()
    carried = bound.carried()
    assert carried.fits_own_batch() and carried.carried_over
    return read(f, bound), read(f, carried)


def test_the_batch_a_type_is_learnt_from_reads_the_same_through_its_carried_form(spark):
    values = [b'{"id": 1, "amount": 0.25, "tags": ["a"]}', b'{"id": 2, "amount": 12.5}', b"{not json",
              None, b"", b"\xff\xfe{}", b"null", b'{"id": 3, "amount": 1, "nested": {"x": [1, 2.5]}}',
              b'{"id": 9223372036854775807, "amount": 1e300}', b'{"id": "four"}']
    as_bound, as_carried = both_forms(spark, values)
    assert as_carried == as_bound
    assert record_frame.REBIND not in {e[0] for _, _, e in as_carried if e}
    assert [o for o, _, e in as_carried if e] == [2, 5]   # the bad JSON and the invalid UTF-8, as bound


def test_envelopes_are_read_through_the_bound_form_in_their_own_batch(spark):
    """A record whose envelope schema conflicts with the bound type is a bad record in its own
    batch, a misfit in a later one: such a type does not claim to fit its batch."""
    schema = {"type": "struct", "optional": False, "fields": [{"field": "id", "type": "int64", "optional": False}]}
    other = {"type": "struct", "optional": False, "fields": [{"field": "id", "type": "string", "optional": False}]}
    f = source(spark, [json.dumps({"schema": schema, "payload": {"id": 1}}).encode(),
                       json.dumps({"schema": other, "payload": {"id": "x"}}).encode()])
    bound = JsonConverter({}).bind(f)
    assert bound.carriable() and not bound.fits_own_batch()


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1) | st.integers(2**63, 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=2),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("abxyz"), inner, max_size=2),
    max_leaves=6)
RECORDS = st.one_of(st.dictionaries(st.sampled_from("abcd"), JSON_VALUES, min_size=1, max_size=3).map(
    lambda o: json.dumps(o).encode()), JSON_VALUES.map(lambda v: json.dumps(v).encode()),
    st.sampled_from([None, b"", b"{not json", b"\xff{}"]))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(RECORDS, min_size=1, max_size=6).filter(lambda vs: any(v not in (None, b"") for v in vs)))
def test_any_batch_reads_the_same_through_the_carried_form_of_its_own_type(spark, values):
    f = source(spark, values)
    try:
        bound = JsonConverter({"schemas.enable": "false"}).bind(f)
    except DataError:   # nothing to learn (only nulls, bad JSON): stays unbound, nothing carried
        return
    if not bound.fits_own_batch():   # a case clash: read as VARIANT, nothing carried
        return
    assert read(f, bound.carried()) == read(f, bound)
