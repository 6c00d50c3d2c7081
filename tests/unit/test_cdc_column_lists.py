"""column.include.list / column.exclude.list and message.key.columns, as Debezium's
ColumnNameFilterFactory (ColumnFilterMode.SCHEMA) and Key.CustomKeyMapper read them."""
from __future__ import annotations

import pytest

from spark_source.postgres.column_lists import ColumnLists
from spark_source.postgres.type_modes import CdcConfigError


def _lists(**options) -> ColumnLists:
    return ColumnLists.from_options({k.replace("_", "."): v for k, v in options.items()}.get)


def test_the_key_columns_come_pattern_by_pattern_and_in_table_order_within_one():
    lists = _lists(message_key_columns=" public.t:b,a ; (.*)\\.items:line.* ")
    assert lists.message_key("public", "t", ["a", "b", "c"]) == ("b", "a")
    assert lists.message_key("shop", "items", ["line2", "sku", "line1"]) == ("line2", "line1")
    assert lists.message_key("public", "T", ["A", "B"]) == ("B", "A")      # case ignored
    assert lists.message_key("public", "other", ["a", "b"]) == ()          # its primary key
    assert _lists(message_key_columns="public.t:a,.*").message_key("public", "t", ["b", "a"]) == ("a", "b")


@pytest.mark.parametrize("value", ["", "public.t", "public.t:a;public.u", "public.t:a:b"])
def test_a_malformed_message_key_columns_is_refused(value):
    with pytest.raises(CdcConfigError) as e:
        _lists(message_key_columns=value)
    assert e.value.details["option"] == "message.key.columns"


def test_column_lists_match_schema_table_column_whole():
    assert _lists(column_exclude_list=r".+\.bb").value_columns("s1", "a", ["pk", "aa", "bb", "bbb"]) == (
        "pk", "aa", "bbb")
    assert _lists(column_include_list=r"s1\.a\.pk, .+AA").value_columns("s1", "a", ["pk", "aa", "bb"]) == ("pk", "aa")
    assert _lists(column_include_list=r"s1\.a\.pk").value_columns("s2", "a", ["pk", "aa"]) == ()
    assert _lists().value_columns("s1", "a", ["pk", "aa"]) == ("pk", "aa")
    with pytest.raises(CdcConfigError):
        _lists(column_include_list="a", column_exclude_list="b")


def test_the_first_mask_option_whose_list_matches_masks_the_column():
    keys = ("column.mask.with.3.chars", "column.mask.with.12.chars", "column.exclude.list")
    lists = ColumnLists.from_options({"column.mask.with.3.chars": r"public\.t\.a", "column.mask.with.12.chars":
                                      r"public\.t\..*", "column.exclude.list": None}.get, keys)
    assert lists.mask("public", "t", "a") == "*" * 12        # option names in order: ...12... before ...3...
    assert lists.mask("public", "t", "b") == "*" * 12
    assert lists.mask("public", "u", "a") is None
    assert ColumnLists.from_options({}.get).mask("public", "t", "a") is None
