"""Arrays built from buffers (:mod:`broker.records.arrow_arrays`) equal what ``pa.array`` and
``pa.scalar`` build from the same values, and the small-batch path of ``record_batch`` equals its
``pa.array`` path; a value the buffer path does not take is refused, not converted."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.records import arrow_arrays, arrow_body

pytestmark = pytest.mark.unit

FAST = settings(max_examples=80, deadline=None, database=None)
INT_TYPES = {pa.int8(): 8, pa.int16(): 16, pa.int32(): 32, pa.int64(): 64}


@FAST
@given(st.lists(st.none() | st.binary(max_size=40), max_size=70))
def test_binary_equals_pa_array(values):
    got = arrow_arrays.binary(values)
    got.validate(full=True)
    assert got.equals(pa.array(values, pa.binary())) and got.null_count == values.count(None)


@FAST
@given(st.sampled_from(list(INT_TYPES)).flatmap(
    lambda t: st.tuples(st.just(t), st.lists(st.integers(-2**(INT_TYPES[t] - 1), 2**(INT_TYPES[t] - 1) - 1),
                                             max_size=50))))
def test_integers_full_and_scalar_equal_pa_array(typed):
    type_, values = typed
    assert arrow_arrays.integers(values, type_).equals(pa.array(values, type_))
    assert arrow_arrays.integers(np.asarray(values, dtype=np.int64), type_).equals(pa.array(values, type_))
    for v in values[:3]:
        assert arrow_arrays.full(4, v, type_).equals(pa.array([v] * 4, type_))
        assert arrow_arrays.scalar(v, type_).equals(pa.scalar(v, type_))


@FAST
@given(st.text(max_size=20), st.integers(0, 40))
def test_repeated_string_equals_pa_array(text, n):
    got = arrow_arrays.repeated_string(text, n)
    got.validate(full=True)
    assert got.equals(pa.array([text] * n, pa.string()))


def test_empty_batch_has_the_schema_and_no_rows():
    batch = arrow_arrays.empty_batch(arrow_body.SCHEMA)
    assert batch.schema == arrow_body.SCHEMA and batch.num_rows == 0


@pytest.mark.parametrize("bad", [["text"], [bytearray(b"x")], [1]])
def test_binary_refuses_anything_but_bytes_and_none(bad):
    with pytest.raises(TypeError, match="bytes and None only"):
        arrow_arrays.binary(bad)


@FAST
@given(st.lists(st.tuples(st.none() | st.binary(max_size=24), st.none() | st.binary(max_size=60),
                          st.integers(-2**63, 2**63 - 1)), max_size=40))
def test_record_batch_from_buffers_equals_the_pa_array_path(records):
    keys, values, stamps = ([r[i] for r in records] for i in range(3))
    got = arrow_body.record_batch(keys, values, stamps)
    got.validate(full=True)
    want = pa.RecordBatch.from_arrays([pa.array(keys, pa.binary()), pa.array(values, pa.binary()),
                                       pa.array(stamps, pa.int64()), pa.nulls(len(records), arrow_body.HEADER_TYPE)],
                                      schema=arrow_body.SCHEMA)
    assert got.equals(want)


def test_record_batch_still_converts_and_refuses_as_arrow_does():
    """What the buffer path does not take goes through ``pa.array``, with its conversions and
    refusals: a str key as UTF-8, a float timestamp as ``pa.array`` makes it, a timestamp out of
    the int64 range refused."""
    assert arrow_body.record_batch(["k"], [b"v"], [1]).column(0).to_pylist() == [b"k"]
    assert arrow_body.record_batch([b"k"], [b"v"], [1.0]).column(2).equals(pa.array([1.0], pa.int64()))
    with pytest.raises(OverflowError):
        arrow_body.record_batch([b"k"], [b"v"], [2**63])
