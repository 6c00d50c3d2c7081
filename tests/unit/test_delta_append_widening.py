"""``delta_append(value_format="json")``: a column whose Connect type widens between the records of
one batch is widened, as it is across batches (the CDC sink's policy, docs/cdc.md)."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from spark_sink.delta import delta_append

pytestmark = pytest.mark.unit


def _record(offset, type_, value):
    doc = {"schema": {"type": "struct", "fields": [{"field": "n", "type": type_, "optional": True}]},
           "payload": {"n": value}}
    return {"key": None, "value": json.dumps(doc).encode(), "topic": "t", "partition": 0, "offset": offset}


@pytest.mark.parametrize("types", [("int32", "int64"), ("int64", "int32")])
def test_a_type_widened_inside_one_batch_widens_the_column(tmp_path, types):
    path = str(tmp_path / "t")
    values = (1, 2 ** 40) if types[0] == "int32" else (2 ** 40, 1)
    delta_append(path, value_format="json", app_id="q")(
        pa.Table.from_pylist([_record(i, t, v) for i, (t, v) in enumerate(zip(types, values))]), 0)
    table = DeltaTable(path).to_pyarrow_table()
    assert table.schema.field("n").type == pa.int64()
    assert sorted(table.column("n").to_pylist()) == [1, 2 ** 40]
