import pytest

from streams.errors import TopologyError
from streams.record import Change, Record, Windowed
from streams.suppress import BufferConfig, SuppressionBufferFullError, Suppressed, SuppressProcessor
from streams.task import Collect, Task, chain
from streams.window_aggregate import TimeWindowAggregate, count_functions
from streams.windows import TimeWindows

C = count_functions()


def pipeline(suppressed, windows):
    agg = TimeWindowAggregate("agg", windows, C.initializer, C.aggregator)
    sup = SuppressProcessor("buf", suppressed, windows)
    out = Collect()
    head = chain(Task("app", 0, [agg.store_spec(), sup.store_spec()]), agg, sup, out)
    return head, out


def test_until_window_closes_emits_each_window_once_with_its_final_count():
    w = TimeWindows.ofSizeAndGrace(10, 5)
    head, out = pipeline(Suppressed.untilWindowCloses(BufferConfig.unbounded()), w)
    for key, ts in [("A", 1), ("A", 2), ("B", 3), ("A", 12), ("A", 14)]:
        head.process(Record(key, None, ts))
    assert out.records == []
    head.process(Record("A", None, 15))                # 15 >= end 10 + grace 5
    assert [(r.key, r.value, r.timestamp) for r in out.records] == [
        (Windowed("A", 0, 10), Change(2, 1), 2), (Windowed("B", 0, 10), Change(1, 0), 3)]
    head.process(Record("A", None, 40))
    assert [(r.key, r.value.new) for r in out.records[2:]] == [(Windowed("A", 10, 20), 3)]


def test_until_window_closes_needs_windows_and_a_strict_buffer():
    with pytest.raises(TopologyError):
        SuppressProcessor("buf", Suppressed.untilWindowCloses(BufferConfig.unbounded()))
    with pytest.raises(TopologyError):
        Suppressed.untilWindowCloses(BufferConfig.maxRecords(3))


def kv_run(suppressed):
    sup, out = SuppressProcessor("buf", suppressed), Collect()
    head = chain(Task("app", 0, [sup.store_spec()]), sup, out)
    return head, out


def test_until_time_limit_keeps_the_latest_change_and_its_first_place():
    head, out = kv_run(Suppressed.untilTimeLimit("10 milliseconds", BufferConfig.unbounded()))
    head.process(Record("k", Change(1, None), 0))
    head.process(Record("j", Change(5, None), 3))
    head.process(Record("k", Change(2, 1), 5))
    assert out.records == []
    head.process(Record("x", Change(9, None), 10))    # k was buffered at 0 <= 10 - 10
    assert out.records == [Record("k", Change(2, 1), 5)]
    head.process(Record("x", Change(None, 9), 13))    # tombstones pass with untilTimeLimit
    assert out.records[1:] == [Record("j", Change(5, None), 3)]
    head.process(Record("y", Change(1, None), 30))
    assert out.records[2:] == [Record("x", Change(None, 9), 13)]


def test_full_buffer_emits_oldest_or_shuts_down():
    head, out = kv_run(Suppressed.untilTimeLimit(100, BufferConfig.maxRecords(2)))
    for i, key in enumerate("abc"):
        head.process(Record(key, Change(i, None), i))
    assert out.records == [Record("a", Change(0, None), 0)]
    head, out = kv_run(Suppressed.untilTimeLimit(100, BufferConfig.maxRecords(2).shutDownWhenFull()))
    head.process(Record("a", Change(0, None), 0))
    head.process(Record("b", Change(0, None), 1))
    with pytest.raises(SuppressionBufferFullError):
        head.process(Record("c", Change(0, None), 2))
    head, out = kv_run(Suppressed.untilTimeLimit(100, BufferConfig.maxBytes(60)))
    for i, key in enumerate("abcd"):
        head.process(Record(key, Change(i, None), i))
    assert out.records and out.records[0].key == "a"
