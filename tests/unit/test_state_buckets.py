"""The bucketed store backing against a dict, over random batches of gets, puts and deletes:
what a later batch reads, the changelog rows, and the number of ``MapState`` calls."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from streams.state_buckets import TARGET, BucketedBacking, StateLayoutError, level_for
from streams.state_codec import decode_key, decode_value, encode_key, encode_value


class MapState:
    """Spark's ``MapState`` calls, over a dict, counted."""
    def __init__(self):
        self.d, self.calls = {}, 0

    def getValue(self, k):
        self.calls += 1
        return (self.d[k[0]],) if k[0] in self.d else None

    def updateValue(self, k, v):
        self.calls += 1
        self.d[k[0]] = v[0]

    def removeKey(self, k):
        self.calls += 1
        self.d.pop(k[0], None)

    def iterator(self):
        self.calls += 1
        return iter([((k,), (v,)) for k, v in self.d.items()])

    def exists(self):
        self.calls += 1
        return bool(self.d)


ops = st.lists(st.tuples(st.sampled_from("gpd"), st.integers(0, 3_000), st.integers()), max_size=400)


@settings(max_examples=40, deadline=None)
@given(st.lists(ops, min_size=1, max_size=6))
def test_every_batch_reads_what_the_earlier_batches_wrote(batches):
    state, model = MapState(), {}
    for batch in batches:
        b, changes = BucketedBacking(state, "cl"), {}
        for op, k, v in batch:
            if op == "g":
                assert b.get(k) == model.get(k)
            elif op == "p":
                b.put(k, v)
                model[k] = changes[k] = v
            else:
                b.delete(k)
                model.pop(k, None)
                changes[k] = None
        rows = list(b.flush(3, None))
        assert {decode_key(kb): (decode_value(vb) if vb is not None else None) for _t, _p, kb, vb, _ts, _h in rows} \
            == changes
        assert [r[2] for r in rows] == sorted(r[2] for r in rows)       # changelog rows in key order
        assert sorted(BucketedBacking(state, "cl").items()) == sorted(model.items())
    level = BucketedBacking(state, None)._level()
    assert level == level_for(len(model))


def test_a_batch_touching_every_key_makes_a_call_per_bucket_not_per_key():
    state = MapState()
    b = BucketedBacking(state, None)
    for k in range(20_000):
        b.put(k, k)
    list(b.flush(0, None))
    level = BucketedBacking(state, None)._level()
    assert level == level_for(20_000) and 20_000 <= TARGET << level
    state.calls = 0
    b = BucketedBacking(state, None)
    for k in range(20_000):
        b.put(k, b.get(k) + 1)
    list(b.flush(0, None))
    assert state.calls <= 2 * (1 << level) + 2                          # each bucket read and written once
    assert BucketedBacking(state, None).get(12_345) == 12_346


def test_a_checkpoint_written_one_entry_per_key_is_refused_not_misread():
    state = MapState()
    state.d[encode_key(("k", "EUR"))] = encode_value(1.08)           # the layout before buckets
    with pytest.raises(StateLayoutError) as refused:
        BucketedBacking(state, None).get(("k", "EUR"))
    assert refused.value.code == 1270 and "delete its checkpoint" in str(refused.value)
