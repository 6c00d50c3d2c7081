"""column.propagate.source.type / datatype.propagate.source.type: the __debezium.source.column.*
schema parameters, with the values Debezium 2.7.4's PostgreSQL tests expect
(RecordsStreamProducerIT.shouldPropagateSourceTypeByDatatype / ...SourceColumnTypeToSchemaParameter,
RecordsSnapshotProducerIT.shouldSnapshotDomainTypeWithPropagatedSourceTypeAttributes / ...AliasWithProperModifiers)."""
from __future__ import annotations

import json

import pytest

from spark_source.postgres.envelope import CdcConfig, EnvelopeBuilder
from spark_source.postgres.pgoutput import Column, Relation
from spark_source.postgres.type_registry import PgType, TypeRegistry

pytestmark = pytest.mark.unit

NUMERIC_5_2, NUMERIC_8_4, NUMERIC_8_3 = (5 << 16 | 2) + 4, (8 << 16 | 4) + 4, (8 << 16 | 3) + 4
TEST_TABLE = Relation(16400, "public", "test_table", "d", (
    Column(True, "id", 23, -1), Column(False, "c1", 23, -1), Column(False, "c2", 23, -1),
    Column(False, "c3a", 1700, NUMERIC_5_2), Column(False, "c3b", 1043, 132), Column(False, "f1", 700, -1),
    Column(False, "f2", 1700, NUMERIC_8_4)))
#   (id SERIAL, c1 INT, c2 INT, c3a NUMERIC(5,2), c3b VARCHAR(128), f1 float(10), f2 decimal(8,4))
ROW = (b"1", b"123", b"456", b"789.01", b"test", b"1.228", b"234.56")


def _params(options: dict, relation=TEST_TABLE, row=ROW, types=None) -> dict:
    config = CdcConfig.from_options({"topic.prefix": "shop", "database.dbname": "shop",
                                     "decimal.handling.mode": "double", **options})
    record = EnvelopeBuilder(config, now_us=lambda: 0, types=types).snapshot_record(relation, row, 5, 0)
    return {f["field"]: f.get("parameters") for f in json.loads(record.value)["schema"]["fields"][0]["fields"]}


def _source(type_name, length, scale, column):
    out = {"__debezium.source.column.type": type_name}
    if length is not None:
        out["__debezium.source.column.length"] = length
    return {**out, "__debezium.source.column.scale": scale, "__debezium.source.column.name": column}


def test_datatype_propagate_source_type_matches_schema_table_and_type_name():
    params = _params({"datatype.propagate.source.type": r".+\.NUMERIC,.+\.VARCHAR,.+\.FLOAT4"})
    assert params == {"id": None, "c1": None, "c2": None, "c3a": _source("NUMERIC", "5", "2", "c3a"),
                      "c3b": _source("VARCHAR", "128", "0", "c3b"), "f1": _source("FLOAT4", "8", "8", "f1"),
                      "f2": _source("NUMERIC", "8", "4", "f2")}


def test_column_propagate_source_type_matches_the_column_name():
    params = _params({"column.propagate.source.type": r".*c3.*, public\.test_table\.id"})
    assert params["c3b"] == _source("VARCHAR", "128", "0", "c3b")
    assert params["id"] == _source("INT4", "10", "0", "id")
    assert (params["c1"], params["f1"]) == (None, None)


def test_a_domain_is_named_as_itself_and_sized_as_its_base():
    types = TypeRegistry((PgType(16500, "float83", "d", base=1700, base_modifier=NUMERIC_8_3),
                          PgType(16501, "money2", "d", base=790), PgType(16502, "varbit2", "d", base=1562, base_modifier=3)))
    alias = Relation(16510, "public", "alias_table", "d", (
        Column(True, "pk", 23, -1), Column(False, "salary", 790, -1), Column(False, "salary2", 16501, -1),
        Column(False, "a", 1700, NUMERIC_8_3), Column(False, "area", 16500, -1), Column(False, "value", 16502, -1)))
    params = _params({"column.propagate.source.type": r"public\.alias_table\.(?!pk).*"}, alias,
                     (b"1", b"$7.25", b"$8.25", b"12345.123", b"12345.123", b"101"), types)
    max_int = str(2 ** 31 - 1)
    assert params == {"pk": None, "salary": _source("MONEY", max_int, "0", "salary"),
                      "salary2": _source("MONEY2", max_int, "0", "salary2"), "a": _source("NUMERIC", "8", "3", "a"),
                      "area": _source("FLOAT83", "8", "3", "area"),
                      "value": {"length": "3", **_source("VARBIT2", "3", "0", "value")}}


def test_truncate_and_masks_come_first_and_a_hash_is_never_shadowed():
    # ColumnMappers.mapperFor: one mapper per column. A truncation or mask.with registered before the
    # propagate options takes the column; a hash also wins here (see column_mappers on Debezium's order).
    params = _params({"column.propagate.source.type": ".*", "column.truncate.to.3.chars": r".*\.c3b",
                      "column.mask.with.2.chars": r".*\.c1", "column.mask.hash.MD5.with.salt.1": r".*\.c2"})
    assert (params["c3b"], params["c1"], params["c2"]) == ({"truncateLength": "3"}, {"masked": "true"},
                                                           {"masked": "true"})
    assert params["f2"] == _source("NUMERIC", "8", "4", "f2")
