"""Column values through the capture against a real embedded PostgreSQL, compared with Debezium's
PostgreSQL connector (PostgresValueConverter, ReplicationMessageColumnValueResolver, TypeRegistry):
a snapshot row and the same row streamed are the same event, domains convert as their root type,
enums, hstore, ltree and point take Debezium's shapes, and a value a required field cannot hold
fails the query instead of becoming null."""
from __future__ import annotations

import base64
import json
import struct

import pytest

from spark_source.postgres.capture import STREAM, Capture, CdcOffset
from spark_source.postgres.options import CdcOptions
from spark_source.postgres.types import ValueConversionError
from tests.conftest import wait_until
from tests.postgres_fixture import fold_changes

pytestmark = pytest.mark.integration

# Every type types.py converts, with values at the edges of their text output.
COLUMNS = """id int PRIMARY KEY, si smallint, i int, bi bigint, n numeric, n52 numeric(5,2), r real,
    d double precision, m money, c char(5), vc varchar(10), t text, b bytea, bo boolean, dt date, tm time,
    tm3 time(3), tmtz timetz, ts timestamp, ts3 timestamp(3), tstz timestamptz, tstz3 timestamptz(3),
    iv interval, u uuid, j json, jb jsonb, x text, ine inet, ci cidr, ma macaddr, ma8 macaddr8, b1 bit(1),
    b8 bit(8), vb varbit(20), pt point, bx box, i4r int4range, ia int[], ta text[], na numeric[], ia2 int[][],
    ba bool[], ca char(3)[], ina inet[], tma time(3)[], da date[], o oid, tv tsvector"""
ROWS = [
    r"""(1, -32768, 2147483647, 9223372036854775807, 123.4500, 123.45, 3.4028235e38, 1.7976931348623157e308,
     92233720368547758.07, 'ab', 'héllo', E'line1\nline2"q', '\x00ff10', true, '2024-02-29', '23:59:59.999999',
     '12:34:56.789', '12:00:00.5+05:30', '2024-01-02 03:04:05.123456', '2024-01-02 03:04:05.123',
     '2024-01-02 03:04:05.123456+02', '2024-01-02 03:04:05.1+02', '1 year 2 mons 3 days 04:05:06.78',
     'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": 1}', '{"b": [1,2]}', '<a>x</a>', '192.168.0.1', '10.0.0.0/8',
     '08:00:2b:01:02:03', '08:00:2b:01:02:03:04:05', B'1', B'10100000', B'101', '(1.5,2)', '((0,0),(1,1))',
     '[1,10)', '{1,NULL,3}', '{"a b","c\"d",NULL,"NULL"}', '{1.10,NULL,2}', '{{1,2},{3,4}}', '{t,f,NULL}',
     '{ab,"c "}', '{10.0.0.1,::1}', '{12:00:00.123}', '{2024-01-01,infinity}', 4294967295, 'a fat cat')""",
    r"""(2, 0, 0, -9223372036854775808, 'NaN', -999.99, 'NaN', '-0', -92233720368547758.08, '', '', '', '\x',
     false, 'infinity', '00:00:00', '00:00:00', '00:00:00-08', 'infinity', '-infinity', 'infinity', '-infinity',
     '-1 years -2 mons +3 days -04:05:06', '00000000-0000-0000-0000-000000000000', 'null', '"s"', '', '::1',
     '::/0', '00:00:00:00:00:00', '00:00:00:00:00:00:00:00', B'0', B'00000000', B'', '(0,0)', '((1,1),(0,0))',
     'empty', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{}', '{-infinity}', 0, '')""",
    r"""(3, NULL, NULL, NULL, 'Infinity', 0.001, 'Infinity', 'Infinity', 0, 'x    ', NULL, NULL, NULL, NULL,
     '-infinity', '24:00:00', NULL, '23:59:59.999999-14:59', '0044-03-15 12:00:00 BC', '10000-01-01 00:00:00',
     '0044-03-15 12:00:00+00 BC', '12000-06-01 00:00:00.001+00', '-178000000 years', NULL, NULL, NULL, NULL,
     NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
     NULL, NULL, NULL)""",
]


def _payload(record):
    return None if record.value is None else json.loads(record.value)["payload"]


def _fields(record) -> dict:
    return {f["field"]: f for f in json.loads(record.value)["schema"]["fields"][1]["fields"]}


def _drain(capture: Capture, start: CdcOffset) -> tuple[list, CdcOffset]:
    out = []
    while True:
        end = capture.next_offset(start, None)
        if end == start:
            return out, start
        out.extend(r for r, _ in capture.records(start, end))
        capture.acknowledge(end)
        start = end


def _snapshot_then_stream(pg_db, writes: list, count: int, **options) -> tuple[list, list]:
    """The snapshot's records, then those of ``writes`` committed after it (``count`` of them)."""
    capture = Capture(CdcOptions.parse(pg_db.options(**options)))
    try:
        snapshot, position = [], capture.initial_offset()
        while position.phase != STREAM:
            end = capture.next_offset(position, 1000)
            snapshot.extend(r for r, _ in capture.records(position, end))
            position = end
        for sql in writes:
            pg_db.execute(sql)
        streamed = []

        def arrived():
            nonlocal position
            more, position = _drain(capture, position)
            streamed.extend(more)
            return len(streamed) >= count
        wait_until(arrived, timeout=30, interval=0.05, message=f"{count} streamed records")
        return snapshot, streamed
    finally:
        capture.close()


def test_a_snapshot_row_and_the_same_row_streamed_are_the_same_event(pg_db):
    """The snapshot reads each value through its type's output function, the text pgoutput sends:
    a ``::text`` cast gave 'true' for a boolean (read as false), trimmed char(n) and added /32 to
    an inet."""
    pg_db.execute(f"CREATE TABLE every_type ({COLUMNS})")
    for row in ROWS:
        pg_db.execute(f"INSERT INTO every_type VALUES {row}")
    again = [f"INSERT INTO every_type VALUES {row.replace('(', '(10', 1)}" for row in ROWS]
    snapshot, streamed = _snapshot_then_stream(pg_db, again, len(ROWS))
    assert [_payload(r)["op"] for r in snapshot + streamed] == ["r"] * len(ROWS) + ["c"] * len(ROWS)
    assert _fields(snapshot[0]) == _fields(streamed[0])
    for read, change in zip(snapshot, streamed):
        before, after = _payload(read)["after"], _payload(change)["after"]
        assert after["id"] == int(f"10{before['id']}")
        differing = {k: (before[k], after[k]) for k in before if k != "id" and before[k] != after[k]}
        assert differing == {}
    first = _payload(snapshot[0])["after"]
    assert (first["bo"], first["c"], first["ine"], first["ca"]) == (True, "ab   ", "192.168.0.1", ["ab ", "c  "])
    assert first["ina"] == ["10.0.0.1", "::1"] and first["b"] == base64.b64encode(b"\x00\xff\x10").decode()


def test_boolean_char_and_inet_keys_fold_snapshot_and_stream_to_one_row(pg_db):
    pg_db.execute("CREATE TABLE k (code char(5), active boolean, host inet, v text, PRIMARY KEY (code, active, host))")
    pg_db.execute("INSERT INTO k VALUES ('ab', true, '10.0.0.1', 'snap')")
    snapshot, streamed = _snapshot_then_stream(
        pg_db, ["UPDATE k SET v = 'streamed' WHERE code = 'ab'", "DELETE FROM k WHERE code = 'ab'"], 3)
    assert {r.key for r in snapshot} == {r.key for r in streamed}
    assert json.loads(snapshot[0].key)["payload"] == {"code": "ab   ", "active": True, "host": "10.0.0.1"}
    assert fold_changes([(r.key, r.value, list(r.headers)) for r in snapshot + streamed]) == {}


def test_domains_convert_as_their_root_type_with_the_nearest_modifier(pg_db):
    """Debezium's RecordsStreamProducerIT.shouldStreamValuesForAliasLikeBaseTypes and
    shouldStreamValuesForDomainTypeOfDomainType."""
    for sql in ("CREATE DOMAIN posint AS int CHECK (VALUE > 0)", "CREATE DOMAIN numeric82 AS numeric(8,2)",
                "CREATE DOMAIN numericex AS numeric82", "CREATE DOMAIN flag AS boolean",
                "CREATE DOMAIN ts_d AS timestamptz", "CREATE DOMAIN bit3 AS bit(3)", "CREATE DOMAIN point2 AS point",
                "CREATE TABLE alias_table (id int PRIMARY KEY, p posint, n numericex, f flag NOT NULL, t ts_d, "
                "b bit3, pt point2, pa posint[])",
                "INSERT INTO alias_table VALUES (1, 5, 123.45, true, '2024-01-01 00:00:00+05', B'101', '(1,1)', "
                "'{1,2}')"):
        pg_db.execute(sql)
    snapshot, streamed = _snapshot_then_stream(
        pg_db, ["INSERT INTO alias_table VALUES (2, 5, 123.45, true, '2024-01-01 00:00:00+05', B'101', '(1,1)', "
                "'{1,2}')"], 1, decimal_handling_mode="double")
    for record in (snapshot[0], streamed[0]):
        fields, after = _fields(record), _payload(record)["after"]
        assert {k: (fields[k]["type"], fields[k].get("name")) for k in ("p", "n", "f", "t", "b", "pt", "pa")} == {
            "p": ("int32", None), "n": ("float64", None), "f": ("boolean", None),
            "t": ("string", "io.debezium.time.ZonedTimestamp"), "b": ("bytes", "io.debezium.data.Bits"),
            "pt": ("struct", "io.debezium.data.geometry.Point"), "pa": ("array", None)}
        assert fields["b"]["parameters"] == {"length": "3"} and fields["f"]["optional"] is False
        assert {k: after[k] for k in ("p", "n", "f", "t", "b", "pa")} == {
            "p": 5, "n": 123.45, "f": True, "t": "2023-12-31T19:00:00.000000Z", "b": "BQ==", "pa": [1, 2]}
    snapshot, _ = _snapshot_then_stream(pg_db, [], 0, slot_name="precise")
    assert _fields(snapshot[0])["n"]["parameters"] == {"scale": "2", "connect.decimal.precision": "8"}


def test_a_domain_or_enum_created_after_the_capture_started_is_resolved(pg_db):
    pg_db.execute("CREATE TABLE early (id int PRIMARY KEY)")
    writes = ["CREATE TYPE mood AS ENUM ('sad', 'ok')", "CREATE DOMAIN posint AS int",
              "CREATE TABLE late (id int PRIMARY KEY, m mood, p posint)", "INSERT INTO late VALUES (1, 'ok', 7)"]
    _, streamed = _snapshot_then_stream(pg_db, writes, 1, publication_autocreate_mode="all_tables")
    fields = _fields(streamed[0])
    assert fields["m"]["name"] == "io.debezium.data.Enum" and fields["p"]["type"] == "int32"
    assert _payload(streamed[0])["after"] == {"id": 1, "m": "ok", "p": 7}


def test_numeric_nan_in_a_not_null_column_fails_naming_decimal_handling_mode(pg_db):
    """A Connect Decimal has no NaN: null in a nullable column (as Debezium writes it), a typed
    error in a NOT NULL one, whose field cannot be null (Debezium cannot write that event)."""
    pg_db.execute("CREATE TABLE nums (id int PRIMARY KEY, optional_n numeric, required_n numeric(5,2) NOT NULL)")
    pg_db.execute("INSERT INTO nums VALUES (1, 'NaN', 1.5)")
    snapshot, streamed = _snapshot_then_stream(pg_db, ["INSERT INTO nums VALUES (2, 'Infinity', 2.5)"], 1)
    assert [_payload(r)["after"]["optional_n"] for r in snapshot + streamed] == [None, None]
    pg_db.execute("INSERT INTO nums VALUES (3, 1, 'NaN')")
    with pytest.raises(ValueConversionError, match="decimal.handling.mode=string") as raised:
        _snapshot_then_stream(pg_db, [], 0, slot_name="again")
    assert raised.value.details["column"] == "required_n"
    snapshot, _ = _snapshot_then_stream(pg_db, [], 0, slot_name="as_string", decimal_handling_mode="string")
    assert [_payload(r)["after"]["required_n"] for r in snapshot] == ["1.50", "2.50", "NAN"]


def test_enum_hstore_ltree_point_and_their_arrays_take_debeziums_shapes(pg_db):
    for sql in ("CREATE EXTENSION hstore", "CREATE EXTENSION ltree", "CREATE EXTENSION citext",
                "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')",
                "CREATE TABLE shapes (id int PRIMARY KEY, e mood, ea mood[], hs hstore, hsa hstore[], lt ltree, "
                "lta ltree[], cta citext[], ra int4range[], tra tstzrange[], p point NOT NULL)"):
        pg_db.execute(sql)
    row = ("(1, 'happy', '{sad,happy}', '\"key4\"=>\"val4\", \"key5\"=>NULL, \"b c\"=>\"x\\\"y\"', "
           "ARRAY['\"key6\"=>\"val6\"'::hstore], 'Top.Science', '{a.b,c}', '{MiXeD,\"x y\"}', "
           "'{\"[1,2)\",empty}', '{\"[2024-01-01 00:00+00,)\"}', '(1.5,-2)')")
    pg_db.execute(f"INSERT INTO shapes VALUES {row}")
    snapshot, streamed = _snapshot_then_stream(pg_db, [f"INSERT INTO shapes VALUES {row.replace('(1', '(2', 1)}"], 1)
    assert _fields(snapshot[0]) == _fields(streamed[0])
    fields = _fields(streamed[0])
    enum = {"type": "string", "optional": True, "name": "io.debezium.data.Enum", "version": 1,
            "parameters": {"allowed": "sad,ok,happy"}}
    assert fields["e"] == {**enum, "field": "e"}
    assert fields["ea"]["items"] == enum
    assert (fields["hs"]["name"], fields["hsa"]["items"]["name"]) == ("io.debezium.data.Json",) * 2
    assert (fields["lt"]["name"], fields["lta"]["items"]["name"]) == ("io.debezium.data.Ltree",) * 2
    assert [fields[k]["items"]["type"] for k in ("cta", "ra", "tra")] == ["string"] * 3
    assert fields["p"]["name"] == "io.debezium.data.geometry.Point" and fields["p"]["optional"] is False
    assert [f["field"] for f in fields["p"]["fields"]] == ["x", "y", "wkb", "srid"]
    for record in (snapshot[0], streamed[0]):
        after = _payload(record)["after"]
        assert after["e"] == "happy" and after["ea"] == ["sad", "happy"]
        # hstore_out's "b c", key4, key5 put into Debezium's HashMap iterate as b c, key5, key4
        # (key5 before key4, as AbstractRecordsProducerTest expects)
        assert after["hs"] == '{"b c":"x\\"y","key5":null,"key4":"val4"}'
        assert after["hsa"] == ['{"key6":"val6"}']
        assert (after["lt"], after["lta"], after["cta"]) == ("Top.Science", ["a.b", "c"], ["MiXeD", "x y"])
        assert after["ra"] == ["[1,2)", "empty"] and after["tra"] == ['["2024-01-01 00:00:00+00",)']
        wkb = base64.b64decode(after["p"]["wkb"])
        assert (after["p"]["x"], after["p"]["y"], after["p"]["srid"]) == (1.5, -2.0, None)
        assert wkb == struct.pack("<BIdd", 1, 1, 1.5, -2.0) and len(wkb) == 21

    snapshot, _ = _snapshot_then_stream(pg_db, [], 0, slot_name="as_map", hstore_handling_mode="map")
    fields = _fields(snapshot[0])
    assert {k: fields["hs"][k] for k in ("type", "keys", "values")} == {
        "type": "map", "keys": {"type": "string", "optional": False}, "values": {"type": "string", "optional": True}}
    assert list(_payload(snapshot[0])["after"]["hs"].items()) == [("b c", 'x"y'), ("key5", None), ("key4", "val4")]


def test_time_arrays_hold_micro_time_whatever_the_precision(pg_db):
    """Debezium's TIME_ARRAY schema is array(MicroTime) for every precision."""
    pg_db.execute("CREATE TABLE times (id int PRIMARY KEY, t3a time(3)[], ta time[], t3 time(3))")
    pg_db.execute("INSERT INTO times VALUES (1, '{12:00:00.123}', '{00:00:01}', '12:00:00.123')")
    snapshot, _ = _snapshot_then_stream(pg_db, [], 0)
    fields, after = _fields(snapshot[0]), _payload(snapshot[0])["after"]
    assert fields["t3a"]["items"] == {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTime",
                                      "version": 1}
    assert fields["ta"]["items"]["name"] == "io.debezium.time.MicroTime"
    assert fields["t3"]["name"] == "io.debezium.time.Time"   # a scalar time(3) stays adaptive
    assert (after["t3a"], after["ta"], after["t3"]) == ([43_200_123_000], [1_000_000], 43_200_123)


def test_date_infinity_is_debeziums_streaming_day_count(pg_db):
    """Debezium's DateTimeFormat gives LocalDate.parse("-5877611-06-21") for 'infinity' and
    "-5877611-06-22" for '-infinity' (PostgresValueConverter.POSITIVE/NEGATIVE_INFINITY_LOCAL_DATE)."""
    pg_db.execute("CREATE TABLE dates (id int PRIMARY KEY, d date, da date[])")
    pg_db.execute("INSERT INTO dates VALUES (1, 'infinity', '{infinity,-infinity}'), (2, '-infinity', NULL)")
    snapshot, streamed = _snapshot_then_stream(
        pg_db, ["INSERT INTO dates VALUES (3, 'infinity', '{infinity,-infinity}'), (4, '-infinity', NULL)"], 2)
    values = [(_payload(r)["after"]["d"], _payload(r)["after"]["da"]) for r in snapshot + streamed]
    assert values == [(-2147472692, [-2147472692, -2147472691]), (-2147472691, None)] * 2
