"""Real PostgreSQL to a Delta table: an unchanged TOASTed ``numeric[]`` and ``bool[]`` keep their
values through an update of another column (a ``numeric`` without a scale, which is stored out of
line only beyond the 38 digits a Delta decimal holds, is read as unavailable), and a multi-dimensional
array value is a dead letter naming its column while the other rows are applied."""
from __future__ import annotations

import pytest

from tests.integration.test_postgres_capture import _kafka_rows, _payload, _stream

pytestmark = pytest.mark.integration

BIG = "9" * 6000 + ".5"   # beyond a Delta decimal, so read back through the sink's parser alone


def test_unchanged_toasted_numerics_and_bool_arrays_keep_their_values_in_delta(pg_db, tmp_path):
    from deltalake import DeltaTable
    from spark_sink.delta import delta_apply
    from spark_sink.delta.records import ChangeParser, records_from_arrow
    from spark_sink.delta.schema import UNAVAILABLE
    pg_db.execute("CREATE TABLE tm (id int PRIMARY KEY, n int, na numeric[], ba bool[])")
    pg_db.execute("CREATE TABLE big (id int PRIMARY KEY, n int, num numeric)")
    for table, column in (("tm", "na"), ("tm", "ba"), ("big", "num")):
        pg_db.execute(f"ALTER TABLE {table} ALTER COLUMN {column} SET STORAGE EXTERNAL")
    statements = ("INSERT INTO tm SELECT 1, 0, ARRAY(SELECT g / 4.0 FROM generate_series(1, 400) g), "
                  "ARRAY(SELECT g % 3 = 0 FROM generate_series(1, 3000) g)", f"INSERT INTO big VALUES (1, 0, {BIG})",
                  "UPDATE tm SET n = 1 WHERE id = 1", "UPDATE big SET n = 1 WHERE id = 1")
    inserted, _, updated, big = _stream(pg_db, *statements, count=4)
    after = _payload(updated)["after"]
    placeholder = _payload(big)["after"]["num"]
    assert placeholder["scale"] == 0 and after["na"] == [placeholder] and len(after["ba"]) == 8 * 28
    assert ChangeParser().parse(records_from_arrow(_kafka_rows([big]))[0]).row["num"] is UNAVAILABLE
    apply = delta_apply(str(tmp_path), app_id="toast-markers")
    apply(_kafka_rows([inserted]), 0)
    apply(_kafka_rows([updated]), 1)
    (row,) = DeltaTable(str(tmp_path / "public.tm")).to_pyarrow_table().to_pylist()
    assert row["n"] == 1 and [str(v) for v in row["na"]] == [f"{g / 4:.18f}" for g in range(1, 401)]
    assert row["ba"] == [g % 3 == 0 for g in range(1, 3001)]


def test_a_multi_dimensional_array_is_a_dead_letter_naming_its_column(pg_db, tmp_path):
    from deltalake import DeltaTable
    from spark_sink.delta import delta_apply
    pg_db.execute("CREATE TABLE grid (id int PRIMARY KEY, cells int[])")
    records = _stream(pg_db, "INSERT INTO grid VALUES (1, '{1,2}'), (2, '{{1,2},{3,4}}'), (3, '{5}')", count=3)
    assert _payload(records[1])["after"]["cells"] == [[1, 2], [3, 4]]   # a schemaless reader keeps the nesting
    dead = []
    delta_apply(str(tmp_path), app_id="grid", errors_tolerance="all", dlq=dead.extend)(_kafka_rows(records), 0)
    rows = DeltaTable(str(tmp_path / "public.grid")).to_pyarrow_table().sort_by("id").to_pylist()
    assert rows == [{"id": 1, "cells": [1, 2]}, {"id": 3, "cells": [5]}]
    (letter,) = dead
    assert letter.error.name == "DELTA_POISON_RECORD" and letter.record.offset == 1
    assert "column 'cells' holds a multi-dimensional array" in str(letter.error)
