"""A key column left out of the row images (``column.exclude.list``) is taken from the record key,
as Debezium's JDBC sink builds a row under ``primary.key.mode=record_key``."""
from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings, strategies as st

from spark_sink.delta.errors import PoisonRecordError
from spark_sink.delta.records import ChangeParser, records_from_arrow
from tests.delta_cdc import Events, batch, random_history, records_of
from tests.unit.test_delta_fold import run_scd1, split_with_replays


def without_column(record: dict, column: str = "id") -> dict:
    """The record as the source emits it when ``column`` is excluded: gone from ``before``,
    ``after`` and their schemas; the record key keeps it."""
    if not record["value"]:
        return record
    doc = json.loads(record["value"])
    for image in ("before", "after"):
        if isinstance(doc["payload"].get(image), dict):
            doc["payload"][image].pop(column, None)
    for f in doc["schema"]["fields"]:
        if f["field"] in ("before", "after"):
            f["fields"] = [g for g in f["fields"] if g["field"] != column]
    return dict(record, value=json.dumps(doc).encode())


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), keys=st.integers(1, 4))
def test_a_history_without_its_key_column_in_the_rows_mirrors_the_source(seed, keys):
    rng = random.Random(seed)
    txns, final = random_history(rng, keys=keys, steps=rng.randint(1, 30))
    records = [without_column(r) for r in records_of(Events(), txns)]
    assert {k[0]: v for k, v in run_scd1(split_with_replays(rng, records)).items()} == final


def test_the_key_column_comes_first_with_the_keys_type():
    record = without_column(Events().change("c", after={"id": 7, "name": "a", "note": None}, lsn=10))
    change = ChangeParser().parse(records_from_arrow(batch([record]))[0])
    assert (change.key, change.row) == ((7,), {"id": 7, "name": "a", "note": None})
    assert change.schema.names[0] == "id" and str(change.schema.field("id").type) == "int32"
    deleted = without_column(Events().change("d", before={"id": 7, "name": None, "note": None}, lsn=11))
    assert ChangeParser().parse(records_from_arrow(batch([deleted]))[0]).key == (7,)


def test_key_columns_named_by_keys_must_be_in_the_row():
    """``keys=`` names value columns (JDBC's ``record_value``): the record key does not fill them."""
    record = without_column(Events().change("c", after={"id": 7, "name": "a", "note": None}, lsn=10))
    with pytest.raises(PoisonRecordError, match="key column"):
        ChangeParser(keys={"public.customers": ["id"]}).parse(records_from_arrow(batch([record]))[0])


def test_a_delta_table_fed_without_its_key_column_in_the_rows_holds_it(tmp_path):
    """Through ``delta_apply`` into a real Delta table (delta-rs): the key column is the table's."""
    from deltalake import DeltaTable

    from spark_sink.delta import delta_apply
    rng = random.Random(5)
    txns, final = random_history(rng, keys=5, steps=30)
    fn = delta_apply(table_path=str(tmp_path / "customers"))
    records = [without_column(r) for r in records_of(Events(), txns)]
    for b, i in enumerate(range(0, len(records), 7)):
        fn(batch(records[i:i + 7]), b)
    table = DeltaTable(str(tmp_path / "customers"))
    assert [f.name for f in table.schema().fields] == ["id", "name", "note"]
    assert {r["id"]: r for r in table.to_pyarrow_table().to_pylist()} == final
