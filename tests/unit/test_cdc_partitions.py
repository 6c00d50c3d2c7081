"""A stream batch's records become Spark partitions a few thousand at a time: IPC streams of at
most ROWS_PER_PARTITION rows, zstd-compressed, every record once and in order."""
from __future__ import annotations

import pyarrow as pa
import pytest

from spark_source.postgres import cdc_source
from spark_source.postgres.envelope import CdcRecord

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("count", [0, 1, 6, 7, 8, 23])
def test_records_are_split_into_partitions_whole_and_in_order(monkeypatch, count):
    monkeypatch.setattr(cdc_source, "ROWS_PER_PARTITION", 7)
    monkeypatch.setattr(cdc_source, "ROWS_PER_BATCH", 3)
    taken = []

    def records():
        for i in range(count):
            taken.append(i)
            yield CdcRecord("shop.public.t", b'{"id":%d}' % i, b'{"op":"u"}' * 20, (("riverlog.cdc.order", b"%d" % i),),
                            99, i), 1_700_000_000_000_000
    parts = cdc_source._partitions(records())
    tables = [pa.ipc.open_stream(p).read_all() for p in parts]
    assert [t.num_rows for t in tables] == [min(7, count - i) for i in range(0, count, 7)]
    assert [k for t in tables for k in t.column("key").to_pylist()] == [b'{"id":%d}' % i for i in range(count)]
    assert all(len(b) <= 3 for t in tables for b in t.to_batches()), "built a few records at a time"
    if count:
        raw = pa.BufferOutputStream()
        with pa.ipc.new_stream(raw, cdc_source.ARROW_SCHEMA) as w:
            for t in tables[:1]:
                for b in t.to_batches():
                    w.write_batch(b)
        assert len(parts[0]) < len(raw.getvalue().to_pybytes()) or count < 3, "compressed"
    assert taken == list(range(count))
