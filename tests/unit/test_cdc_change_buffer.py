"""ChangeBuffer: a pending transaction's changes packed as their pgoutput bytes, spilled to a file
past a threshold: every read gives back what was appended (minus the subtransactions dropped), in
order, however the entries fall across the file's read blocks and the memory tail."""
from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_source.postgres import change_buffer
from spark_source.postgres.change_buffer import ChangeBuffer
from spark_source.postgres.pgoutput import Column, Insert, Relation
from tests.unit.test_pgoutput import encode

pytestmark = pytest.mark.unit

RELATIONS = [None, Relation(1, "public", "a", "d", (Column(True, "id", 25, -1),)),
             Relation(1, "public", "a", "d", (Column(True, "id", 25, -1), Column(False, "n", 25, -1)))]
ENTRY = st.tuples(st.sampled_from(range(len(RELATIONS))), st.integers(0, 2**63 - 1),
                  st.binary(max_size=40), st.sampled_from([None, 7, 8]), st.booleans())
STEP = st.one_of(ENTRY, st.sampled_from([7, 8]).map(lambda x: ("drop", x)))


@settings(max_examples=200, deadline=None, database=None, derandomize=True)
@given(st.lists(STEP, max_size=40), st.sampled_from([None, 0, 30, 200]), st.integers(1, 64))
def test_every_read_gives_back_what_was_kept_in_order(steps, spill, block):
    old_read, old_write = change_buffer._READ_CHUNK, change_buffer._WRITE_CHUNK
    change_buffer._READ_CHUNK, change_buffer._WRITE_CHUNK = block, block * 2
    try:
        buffer, model = ChangeBuffer(spill), []
        for step in steps:
            if step[0] == "drop":
                buffer.drop_xid(step[1])
                model = [m for m in model if m[3] != step[1]]
                continue
            rel, lsn, value, xid, in_stream = step
            message = Insert(16384, (value,), xid if in_stream and xid is not None else None)
            payload = encode(message)
            buffer.append(RELATIONS[rel], lsn, payload, xid, in_stream and xid is not None)
            model.append((RELATIONS[rel], lsn, message, xid))
        for _ in range(2):
            got = list(buffer.entries())
            assert [g[1:] for g in got] == [m[1:] for m in model]
            assert all(g[0] is m[0] for g, m in zip(got, model)), "each change keeps its own Relation"
            assert len(buffer) == len(model)
        buffer.close()
    finally:
        change_buffer._READ_CHUNK, change_buffer._WRITE_CHUNK = old_read, old_write


def test_past_the_threshold_the_entries_live_in_an_unlinked_file(tmp_path):
    buffer = ChangeBuffer(spill_bytes=100, spill_dir=str(tmp_path))
    payload = encode(Insert(16384, (b"x" * 50,)))
    for lsn in range(10):
        buffer.append(RELATIONS[1], lsn, payload, None, False)
    assert buffer.spilled and buffer.size_bytes > 100
    assert os.listdir(tmp_path) == [], "the file is unlinked when made: a crash leaves nothing"
    assert [lsn for _, lsn, _, _ in buffer.entries()] == list(range(10))
    buffer.close()
    with pytest.raises(ValueError):
        list(buffer.entries())
