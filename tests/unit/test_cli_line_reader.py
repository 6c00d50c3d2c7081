"""``riverlog produce``'s line reader against Kafka's LineMessageReaderTest: the ``--property``
names of the console producer (parse.key, key.separator, parse.headers, headers.delimiter,
headers.separator, headers.key.separator, ignore.error, null.marker), their defaults and errors."""
from __future__ import annotations

import pytest

from broker.cli.line_reader import LineReader, LineReaderError, java_split
from broker.cli.console_options import line_reader_of

pytestmark = pytest.mark.unit

KEY_AND_HEADERS = {"parse.key": "true", "parse.headers": "true"}


def read(props: dict, text: str):
    """(headers, key, value) of each line of ``text``, as str (None stays None)."""
    reader = LineReader.from_properties(props)
    out = []
    for number, line in enumerate(text.split("\n"), 1):
        if line == "" and number == len(text.split("\n")):
            break
        headers, key, value = reader.parse(line.encode(), number)
        out.append(([(k, None if v is None else v.decode()) for k, v in headers],
                    None if key is None else key.decode(), None if value is None else value.decode()))
    return out


def test_defaults_send_the_whole_line_as_the_value():
    assert read({}, "key0\tvalue0\n") == [([], None, "key0\tvalue0")]


def test_parse_key_splits_at_the_first_tab():
    assert read({"parse.key": "true"}, "key0\tvalue0\nkey1\tvalue1\n") == [([], "key0", "value0"),
                                                                            ([], "key1", "value1")]
    assert read({"parse.key": "TRUE "}, "key\t") == [([], "key", "")]


def test_headers_key_and_value():
    assert read(KEY_AND_HEADERS, "headerKey0:headerValue0,headerKey1:headerValue1\tkey0\tvalue0\n") == [
        ([("headerKey0", "headerValue0"), ("headerKey1", "headerValue1")], "key0", "value0")]
    assert read(KEY_AND_HEADERS, ":\t\t") == [([("", "")], "", "")]


def test_headers_without_a_key():
    assert read({"parse.headers": "true"}, "headerKey:headerValue\tvalue\n") == [
        ([("headerKey", "headerValue")], None, "value")]


def test_demarcations_longer_than_one_character():
    props = {**KEY_AND_HEADERS, "key.separator": "\t\t", "headers.delimiter": "\t\t", "headers.separator": "---",
             "headers.key.separator": "::::"}
    assert read(props, "headerKey0.0::::headerValue0.0---headerKey1.0::::\t\tkey\t\tvalue") == [
        ([("headerKey0.0", "headerValue0.0"), ("headerKey1.0", "")], "key", "value")]


def test_custom_demarcations_and_varying_header_counts():
    props = {**KEY_AND_HEADERS, "key.separator": "#", "headers.delimiter": "!", "headers.separator": "&"}
    assert read(props, "h0:v0&h1:v1!key0#value0\nh2:v2!key1#value1") == [
        ([("h0", "v0"), ("h1", "v1")], "key0", "value0"), ([("h2", "v2")], "key1", "value1")]


def test_missing_separators_fail_with_kafkas_messages():
    reader = LineReader.from_properties(KEY_AND_HEADERS)
    with pytest.raises(LineReaderError) as e:
        reader.parse(b"headerKey1.0:headerValue1.0\tkey1[MISSING-DELIMITER]value1", 2)
    assert str(e.value) == ("No key separator found on line number 2: "
                            "'headerKey1.0:headerValue1.0\tkey1[MISSING-DELIMITER]value1'")
    with pytest.raises(LineReaderError) as e:
        reader.parse(b"key[MISSING-DELIMITER]val\tkey0\tvalue0", 1)
    assert str(e.value) == "No header key separator found in pair 'key[MISSING-DELIMITER]val' on line number 1"
    with pytest.raises(LineReaderError, match="No headers delimiter found on line number 3"):
        reader.parse(b"no-delimiter", 3)


@pytest.mark.parametrize("props, message", [
    ({"headers.separator": "\t"}, "headers.delimiter and headers.separator may not be equal"),
    ({"headers.key.separator": "\t"}, "headers.delimiter and headers.key.separator may not be equal"),
    ({"headers.key.separator": ","}, "headers.separator and headers.key.separator may not be equal"),
    ({"null.marker": "\t", "headers.delimiter": "|"}, "null.marker and key.separator may not be equal"),
    ({"headers.delimiter": "-", "headers.separator": ":", "headers.key.separator": "/", "null.marker": "-"},
     "null.marker and headers.delimiter may not be equal"),
    ({"headers.delimiter": "-", "headers.separator": ":", "headers.key.separator": "/", "null.marker": ":"},
     "null.marker and headers.separator may not be equal"),
    ({"headers.delimiter": "-", "headers.separator": ":", "headers.key.separator": "/", "null.marker": "/"},
     "null.marker and headers.key.separator may not be equal"),
])
def test_demarcations_that_collide_are_refused(props, message):
    with pytest.raises(LineReaderError) as e:
        LineReader.from_properties({**KEY_AND_HEADERS, **props})
    assert str(e.value) == message


def test_ignore_error_sends_what_it_can():
    text = ("headerKey0.0:headerValue0.0\tkey0\tvalue0\n"
            "headerKey1.0:headerValue1.0,headerKey1.1:headerValue1.1[MISSING-HEADER-DELIMITER]key1\tvalue1\n"
            "headerKey2.0:headerValue2.0\tkey2[MISSING-KEY-DELIMITER]value2\n"
            "headerKey3.0:headerValue3.0[MISSING-HEADER-DELIMITER]key3[MISSING-KEY-DELIMITER]value3\n")
    assert read({**KEY_AND_HEADERS, "ignore.error": "true"}, text) == [
        ([("headerKey0.0", "headerValue0.0")], "key0", "value0"),
        ([("headerKey1.0", "headerValue1.0"), ("headerKey1.1", "headerValue1.1[MISSING-HEADER-DELIMITER]key1")],
         None, "value1"),
        ([("headerKey2.0", "headerValue2.0")], None, "key2[MISSING-KEY-DELIMITER]value2"),
        ([], None, "headerKey3.0:headerValue3.0[MISSING-HEADER-DELIMITER]key3[MISSING-KEY-DELIMITER]value3")]
    assert read({**KEY_AND_HEADERS, "ignore.error": "true"}, "key-val\tkey0\tvalue0\n") == [
        ([("key-val", None)], "key0", "value0")]


def test_null_marker():
    text = "key\t\nkey\t<NULL>\nkey\t<NULL>value\n<NULL>\tvalue\n<NULL>\t<NULL>"
    props = {"parse.key": "true", "null.marker": "<NULL>"}
    assert read(props, text) == [([], "key", ""), ([], "key", None), ([], "key", "<NULL>value"),
                                 ([], None, "value"), ([], None, None)]
    del props["null.marker"]
    assert read(props, text)[-1] == ([], "<NULL>", "<NULL>")


def test_null_marker_with_headers():
    text = ("h0:v0,h1:v1\t<NULL>\tvalue\n<NULL>\tkey\t<NULL>\nh0:,h1:v1\t<NULL>\t<NULL>\n"
            "h0:<NULL>,h1:v1\tkey\t<NULL>\nh0:<NULL>,h1:<NULL>value\tkey\t<NULL>\n")
    h1 = ("h1", "v1")
    assert read({**KEY_AND_HEADERS, "null.marker": "<NULL>"}, text) == [
        ([("h0", "v0"), h1], None, "value"), ([], "key", None), ([("h0", ""), h1], None, None),
        ([("h0", None), h1], "key", None), ([("h0", None), ("h1", "<NULL>value")], "key", None)]
    with pytest.raises(LineReaderError) as e:
        LineReader.from_properties(KEY_AND_HEADERS).parse(b"<NULL>\tkey\t<NULL>", 2)
    assert str(e.value) == "No header key separator found in pair '<NULL>' on line number 2"


def test_a_header_key_may_not_be_the_null_marker():
    with pytest.raises(LineReaderError) as e:
        LineReader.from_properties({**KEY_AND_HEADERS, "null.marker": "<NULL>"}).parse(b"<NULL>:v0,h1:v1\tk\tv", 1)
    assert str(e.value) == "Header keys should not be equal to the null marker '<NULL>' as they can't be null"
    assert read(KEY_AND_HEADERS, "<NULL>:v0,h1:v1\tkey\tvalue") == [([("<NULL>", "v0"), ("h1", "v1")], "key", "value")]


def test_header_list_splits_as_java_string_split():
    assert java_split(b"a:1,b:2,,", b",") == [b"a:1", b"b:2"]
    assert java_split(b"", b",") == [b""]
    assert read(KEY_AND_HEADERS, "a:1,\tk\tv") == [([("a", "1")], "k", "v")]


def test_unknown_property_is_refused_naming_the_known_ones():
    with pytest.raises(LineReaderError) as e:
        LineReader.from_properties({"parse.keys": "true"})
    assert "parse.keys" in str(e.value) and "parse.key, key.separator" in str(e.value)


def test_named_options_join_the_properties():
    reader = line_reader_of(None, ["parse.headers=true", "key.separator=;"], ":", True)
    assert (reader.parse_key, reader.key_separator, reader.parse_headers, reader.ignore_error) == (True, ":", True, True)
    assert line_reader_of(None, ["parse.key=true", "key.separator= | "], None, False).key_separator == " | "


def test_reader_config_file_reads_java_escapes(tmp_path):
    path = tmp_path / "reader.properties"
    path.write_text("# a comment\nparse.key = true\nkey.separator=\\t\nnull.marker:\\u0000\n")
    reader = line_reader_of(str(path), ["null.marker=~"], None, False)
    assert (reader.parse_key, reader.key_separator, reader.null_marker) == (True, "\t", "~")
    assert line_reader_of(str(path), [], None, False).null_marker == "\x00"
