"""The Delta sink's rejects are a function of the batch and the schema it is planned against.

A replay of an applied batch plans the same changes against the schema the batch committed (the
planned one), so it must find the same misfits: checked as a property over random schemaless and
typed batches, plus the cases the planning must not reject (a new column, a widening).
"""
from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import assume, given, settings, strategies as st

from spark_sink.delta.errors import SchemaChangeError
from spark_sink.delta.fit import misfits, plan
from spark_sink.delta.records import Change, SourceRecord
from spark_sink.delta.schema import UNAVAILABLE

pytestmark = pytest.mark.unit

VALUES = st.one_of(st.none(), st.just(UNAVAILABLE), st.integers(-3, 3), st.sampled_from([2 ** 40, 2 ** 70]),
                   st.text(max_size=2), st.booleans(), st.floats(allow_nan=False, width=32),
                   st.lists(st.integers(0, 2), max_size=2), st.fixed_dictionaries({"a": st.integers(0, 2)}))
TYPES = st.sampled_from([pa.int32(), pa.int64(), pa.string(), pa.float64(), pa.bool_()])


def change(n, i, row, op="c", schema=None):
    """The batch's n-th change (its position and offset), of key ``i``."""
    return Change("public.t", (i,), op, {"id": i, **row}, (100 + n, 0), 0,
                  SourceRecord("t", 0, n, None, b"{}"), schema)


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(st.dictionaries(st.sampled_from(["a", "b", "c"]), VALUES, max_size=3), min_size=1, max_size=8),
       target=st.one_of(st.none(), st.dictionaries(st.sampled_from(["a", "b"]), TYPES, max_size=2)),
       ops=st.lists(st.sampled_from("cud"), min_size=8, max_size=8), scd_type=st.sampled_from([1, 2]),
       typed=st.booleans())
def test_a_batch_misfits_the_same_changes_against_the_schema_it_committed(rows, target, ops, scd_type, typed):
    if target is not None:
        target = pa.schema([("id", pa.int64())] + list(target.items()))
    width = pa.schema([("id", pa.int64()), ("a", pa.int64())]) if typed else None
    changes = [change(i, i, r, ops[i], width if typed and i == 0 else None) for i, r in enumerate(rows)]
    try:
        planned = plan("public.t", changes, target, scd_type).schema
    except SchemaChangeError:
        assume(False)   # the batch fails whole, before anything is written
    first = misfits("public.t", changes, planned, ("id",), scd_type)
    committed = plan("public.t", changes, planned, scd_type).schema
    assert {f.name: f.type for f in committed} == {f.name: f.type for f in planned}
    again = misfits("public.t", changes, committed, ("id",), scd_type)
    assert [(c.record.offset, e.message) for c, e in first] == [(c.record.offset, e.message) for c, e in again]
    for c, e in first:
        assert e.details["offset"] == c.record.offset and e.details["column"] in planned.names


def test_a_new_column_and_a_widening_in_the_batch_reject_nothing_but_a_value_of_another_type():
    table = pa.schema([("id", pa.int32()), ("name", pa.string())])
    typed = pa.schema([("id", pa.int64()), ("name", pa.string())])
    changes = [change(0, 2 ** 40, {"name": "big"}, schema=typed), change(1, 2 ** 40 + 1, {"name": "x", "score": 7}),
               change(2, 3, {"name": "y", "score": "high"}), change(3, 4, {"name": 5})]
    planned = plan("public.t", changes, table, 1)
    assert planned.schema.field("id").type == pa.int64() and planned.schema.field("score").type == pa.int64()
    assert [c.key for c, _ in misfits("public.t", changes, planned.schema, ("id",), 1)] == [(3,), (4,)]


def test_a_delete_is_checked_on_what_it_writes():
    """SCD-1 writes a delete's key only; SCD-2 may write its before image as the delete row."""
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    delete = change(0, 1, {"name": 7}, op="d")
    assert misfits("public.t", [delete], schema, ("id",), 1) == []
    assert [c.key for c, _ in misfits("public.t", [delete], schema, ("id",), 2)] == [(1,)]
