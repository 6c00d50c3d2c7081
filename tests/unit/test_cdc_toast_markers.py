"""Unchanged TOASTed values of every type: the source gives each a placeholder that fits the
column's schema, the Delta sink reads each as unavailable, and a column whose schema has no such
value fails the event by name instead of carrying a null a sink would write over the value.
An array value of more dimensions than its schema is refused by the sink by name."""
from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spark_sink.delta.errors import PoisonRecordError
from spark_sink.delta.records import ChangeParser, SourceRecord
from spark_sink.delta.schema import UNAVAILABLE, converter
from spark_source.postgres import types as T
from spark_source.postgres.envelope import CdcConfig, EnvelopeBuilder
from spark_source.postgres.pgoutput import UNCHANGED_TOAST, Begin, Column, Commit, Relation, Update
from spark_source.postgres.source_types import BUILTIN_NAMES
from spark_source.postgres.transactions import TransactionAssembler
from spark_source.postgres.type_modes import TypeModes
from spark_source.postgres.type_registry import PgType, TypeRegistry
from spark_source.postgres.types import ValueConversionError, column_type

pytestmark = pytest.mark.unit

HSTORE, HSTORE_ARRAY, MOOD, MOOD_ARRAY, AMOUNT, AMOUNT_ARRAY = 20000, 20001, 20002, 20003, 20004, 20005
REGISTRY = TypeRegistry((PgType(HSTORE, "hstore", "b"), PgType(HSTORE_ARRAY, "_hstore", "b", HSTORE),
                         PgType(MOOD, "mood", "e", labels=("sad", "ok")), PgType(MOOD_ARRAY, "_mood", "b", MOOD),
                         PgType(AMOUNT, "amount", "d", base=T.NUMERIC), PgType(AMOUNT_ARRAY, "_amount", "b", AMOUNT)))
# Every type pgoutput can send as 'u' (varlena) and every mode that shapes it.
OIDS = sorted((set(BUILTIN_NAMES) | set(T.ARRAY_ELEMENT)) - {16, 20, 21, 23, 26, 600, 700, 701, 790, 1082, 1083, 1114,
                                                             1184, 1186, 1266, 2950, 829, 774}
              | {HSTORE, HSTORE_ARRAY, MOOD, MOOD_ARRAY, AMOUNT, AMOUNT_ARRAY})
MODES = [TypeModes(decimal_handling_mode=d, hstore_handling_mode=h, binary_handling_mode=b)
         for d in ("precise", "string") for h in ("json", "map") for b in ("bytes", "hex")]
PLACEHOLDERS = ("__debezium_unavailable_value", "hex:ff00017f80", "x")
DEFAULT_B64 = base64.b64encode(b"__debezium_unavailable_value").decode()


def _field(ctype) -> dict:
    return ctype.schema("c")


def test_numeric_without_scale_numeric_arrays_and_bool_arrays_have_placeholders_that_fit_their_schemas():
    vsd = {"scale": 0, "value": DEFAULT_B64}
    assert column_type(T.NUMERIC, -1).placeholder == vsd
    assert column_type(AMOUNT, -1, registry=REGISTRY).placeholder == vsd     # a domain over numeric
    assert column_type(1231, -1).placeholder == [vsd]                         # numeric[]
    assert column_type(AMOUNT_ARRAY, -1, registry=REGISTRY).placeholder == [vsd]
    bits = column_type(1000, -1).placeholder                                  # bool[]
    assert len(bits) == 8 * 28 and all(type(b) is bool for b in bits) and bits[:8] == [
        False, True, False, True, True, True, True, True]                     # '_' = 0x5f
    assert column_type(1561, -1).placeholder == bits                          # bit(1)[]: booleans too
    assert column_type(HSTORE_ARRAY, -1, TypeModes(hstore_handling_mode="map"), registry=REGISTRY).placeholder == [
        {"__debezium_unavailable_value": "__debezium_unavailable_value"}]


@pytest.mark.parametrize("placeholder", PLACEHOLDERS)
@pytest.mark.parametrize("modes", MODES, ids=lambda m: f"{m.decimal_handling_mode}-{m.hstore_handling_mode}-"
                                                       f"{m.binary_handling_mode}")
def test_every_toastable_type_has_a_placeholder_the_delta_sink_reads_as_unavailable(modes, placeholder):
    """Source and sink agree: the source's stand-in for each type is the sink's UNAVAILABLE."""
    for oid in OIDS:
        for typmod in (-1, (10 << 16 | 2) + 4):
            if (oid, typmod) == (T.BIT, -1):
                continue   # bit(1): a boolean, a few bytes, never stored out of line
            ctype = column_type(oid, typmod, modes, placeholder, REGISTRY)
            assert ctype.placeholder is not None, (oid, typmod)
            wire = json.loads(json.dumps(ctype.placeholder))
            assert converter(_field(ctype), placeholder)(wire) is UNAVAILABLE, (oid, typmod, wire)


def test_only_a_numeric_under_double_has_no_placeholder():
    double = TypeModes(decimal_handling_mode="double")
    missing = {oid for oid in OIDS
               if oid != T.BIT and column_type(oid, -1, double, registry=REGISTRY).placeholder is None}
    assert missing == {T.NUMERIC, AMOUNT}


@given(st.lists(st.booleans(), min_size=1, max_size=300))
def test_a_real_bool_array_is_data_unless_it_is_the_placeholders_bits(values):
    convert = converter(_field(column_type(1000, -1)))
    assert (convert(values) is UNAVAILABLE) == (values == column_type(1000, -1).placeholder)


def test_real_numerics_and_integer_lists_are_data():
    numeric = converter(_field(column_type(T.NUMERIC, -1)))
    assert numeric({"scale": 0, "value": base64.b64encode(b"\x01").decode()}) == 1
    with pytest.raises(ValueError):   # another scale is data (too large for the Delta decimal here)
        numeric({"scale": 1, "value": DEFAULT_B64})
    bools = converter(_field(column_type(1000, -1)))
    as_ints = [int(b) for b in column_type(1000, -1).placeholder]
    with pytest.raises(ValueError):   # integers are not booleans, even where they equal the bits
        bools(as_ints)


# -- the envelope: a column with no placeholder fails the event by name -----------------------------
PRICES = Relation(16390, "public", "prices", "d", (Column(True, "id", 23, -1), Column(False, "n", 23, -1),
                                                   Column(False, "amount", T.NUMERIC, -1)))


def _update(relation, old, old_kind, new, **options):
    config = CdcConfig.from_options({"topic.prefix": "shop", "database.dbname": "shop", **options})
    builder = EnvelopeBuilder(config, now_us=lambda: 1)
    a = TransactionAssembler()
    a.feed(relation, 1)
    a.feed(Begin(200, 1, 7), 100)
    a.feed(Update(relation.oid, old, old_kind, new), 110)
    (txn,) = a.feed(Commit(0, 192, 200, 1), 192)
    return [json.loads(r.value)["payload"] for r in builder.transaction_records(txn) if r.value]


def test_an_unchanged_toasted_numeric_under_precise_carries_the_variable_scale_placeholder():
    (event,) = _update(PRICES, None, None, (b"1", b"2", UNCHANGED_TOAST))
    assert event["after"]["amount"] == {"scale": 0, "value": DEFAULT_B64}


def test_an_unchanged_toasted_value_with_no_placeholder_fails_the_event_naming_column_and_remedy():
    with pytest.raises(ValueConversionError) as e:
        _update(PRICES, None, None, (b"1", b"2", UNCHANGED_TOAST), **{"decimal.handling.mode": "double"})
    assert e.value.name == "CDC_VALUE_CONVERSION" and e.value.details["column"] == "amount"
    assert "'amount' of public.prices" in str(e.value) and "decimal.handling.mode=precise or string" in str(e.value)
    assert "REPLICA IDENTITY FULL" in str(e.value)


def test_the_old_tuple_or_an_excluded_column_needs_no_placeholder():
    full = Relation(16391, "public", "prices", "f", PRICES.columns)
    (event,) = _update(full, (b"1", b"1", b"12.5"), "O", (b"1", b"2", UNCHANGED_TOAST),
                       **{"decimal.handling.mode": "double"})
    assert event["after"]["amount"] == 12.5
    (event,) = _update(PRICES, None, None, (b"1", b"2", UNCHANGED_TOAST),
                       **{"decimal.handling.mode": "double", "column.exclude.list": "public.prices.amount"})
    assert "amount" not in event["after"]


# -- the sink: a multi-dimensional array is a poison record naming the column -----------------------
def _record(items: dict, value) -> SourceRecord:
    row = {"type": "struct", "fields": [{"type": "int32", "optional": False, "field": "id"},
                                        {"type": "array", "items": {**items, "optional": True}, "optional": True,
                                         "field": "grid"}], "optional": True, "name": "shop.public.g.Value"}
    envelope = {"type": "struct", "fields": [{**row, "field": "before"}, {**row, "field": "after"},
                                             {"type": "string", "optional": False, "field": "op"}],
                "optional": False, "name": "shop.public.g.Envelope"}
    payload = {"before": None, "after": {"id": 1, "grid": value}, "op": "c",
               "source": {"schema": "public", "table": "g"}}
    key = {"schema": {"type": "struct", "fields": [{"type": "int32", "optional": False, "field": "id"}],
                      "optional": False}, "payload": {"id": 1}}
    return SourceRecord("shop.public.g", 0, 7, json.dumps(key).encode(),
                        json.dumps({"schema": envelope, "payload": payload}).encode())


@pytest.mark.parametrize("items, value", [
    ({"type": "int32"}, [[1, 2], [3, 4]]),
    ({"type": "string"}, [["a"], ["b"]]),
    ({"type": "float64"}, [[1.5], [2.5]]),
    ({"type": "boolean"}, [[True], [False]]),
    ({"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1,
      "parameters": {"scale": "2"}}, [["AQ=="], ["Ag=="]]),
    (T.column_type(T.NUMERIC, -1).schema_body, [[{"scale": 0, "value": "AQ=="}]]),
])
def test_a_multi_dimensional_array_is_a_poison_record_naming_the_column(items, value):
    with pytest.raises(PoisonRecordError) as e:
        ChangeParser().parse(_record(items, value))
    assert "column 'grid' holds a multi-dimensional array" in str(e.value)
    assert e.value.details["offset"] == 7


def test_a_one_dimensional_array_and_an_array_of_arrays_schema_still_convert():
    assert ChangeParser().parse(_record({"type": "int32"}, [1, None, 3])).row["grid"] == [1, None, 3]
    nested = {"type": "array", "items": {"type": "int32", "optional": True}}
    assert ChangeParser().parse(_record(nested, [[1, 2], [3]])).row["grid"] == [[1, 2], [3]]
