"""TimeWindowAggregate(count) against a brute-force oracle from the definitions, and a task
restored from a copy of its backings continuing exactly as the original."""
import copy

from hypothesis import given, settings, strategies as st

from streams.stores import DictBacking
from streams.window_aggregate import TimeWindowAggregate, count_functions
from streams.windows import TimeWindows
from tests.streams._windowing import Run

C = count_functions()
records = st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 60)), max_size=40)
windows = st.builds(lambda size, adv, grace: TimeWindows.ofSizeAndGrace(size, grace).advanceBy(min(adv, size)),
                    st.integers(1, 12), st.integers(1, 12), st.integers(0, 8))


def oracle(ws, recs):
    """From the definitions: a record counts in window [s, s+size) iff s <= ts < s+size and, when it
    arrives, s+size > max(timestamps so far) - grace; the last state per window is the count."""
    counts, stream_time = {}, None
    for key, ts in recs:
        stream_time = ts if stream_time is None else max(stream_time, ts)
        for s in range(0, ts + 1):
            if s % ws.advanceMs == 0 and s <= ts < s + ws.sizeMs and s + ws.sizeMs > stream_time - ws.graceMs:
                counts[(key, s)] = counts.get((key, s), 0) + 1
    return counts


def finals(out):
    last = {}
    for key, start, _end, new, _old, _ts in out:
        last[(key, start)] = new
    return last


@settings(max_examples=150, deadline=None)
@given(ws=windows, recs=records)
def test_counts_match_the_oracle(ws, recs):
    run = Run(TimeWindowAggregate("s", ws, C.initializer, C.aggregator))
    out = [r for key, ts in recs for r in run.send(key, None, ts)]
    assert finals(out) == oracle(ws, recs)


@settings(max_examples=150, deadline=None)
@given(ws=windows, recs=records, cut=st.integers(0, 40))
def test_restored_task_continues_identically(ws, recs, cut):
    cut = min(cut, len(recs))
    whole = Run(TimeWindowAggregate("s", ws, C.initializer, C.aggregator))
    expected = [r for key, ts in recs for r in whole.send(key, None, ts)]

    first = Run(TimeWindowAggregate("s", ws, C.initializer, C.aggregator))
    out = [r for key, ts in recs[:cut] for r in first.send(key, None, ts)]
    restored = {}
    for name, backing in first.backings.items():          # the changelog: backing entries, replayed
        b = restored[name] = DictBacking()
        for k, v in copy.deepcopy(backing.changes):
            if v is None:
                b.data.pop(k, None)
            else:
                b.data[k] = v
    second = Run(TimeWindowAggregate("s", ws, C.initializer, C.aggregator), backings=restored)
    out += [r for key, ts in recs[cut:] for r in second.send(key, None, ts)]
    assert out == expected
