"""``unavailable.value.placeholder`` with Debezium's ``hex:`` prefix (PostgresConnectorConfig
``getUnavailableValuePlaceholder``): the rest is hexadecimal octets. Bytes columns carry those
octets, string columns ``new String(octets)``, integer arrays the octets as numbers, ``uuid[]``
``UUID.nameUUIDFromBytes(octets)``; the Delta sink given the same option recognises every form."""
from __future__ import annotations

import base64
import hashlib
import uuid

import pytest

from spark_sink.delta import config as delta_config
from spark_sink.delta.errors import DeltaConfigError
from spark_sink.delta.schema import UNAVAILABLE, converter
from spark_source.postgres import types as T
from spark_source.postgres.cdc_config import CdcConfig
from spark_source.postgres.types import CdcConfigError, column_type

pytestmark = pytest.mark.unit

HEX = "hex:cafe00ff41"
RAW = bytes.fromhex("cafe00ff41")


def test_a_hex_placeholder_is_its_octets_in_every_column_kind():
    assert base64.b64decode(column_type(T.BYTEA, -1, placeholder=HEX).placeholder) == RAW
    assert column_type(T.TEXT, -1, placeholder=HEX).placeholder == RAW.decode("utf-8", errors="replace")
    assert column_type(1007, -1, placeholder=HEX).placeholder == [-54, -2, 0, -1, 65]       # int4[]
    assert column_type(2951, -1, placeholder=HEX).placeholder == [
        str(uuid.UUID(bytes=hashlib.md5(RAW).digest(), version=3))]                           # uuid[]


def test_a_text_placeholder_is_unchanged():
    assert column_type(T.TEXT, -1, placeholder="hexagon").placeholder == "hexagon"
    assert base64.b64decode(column_type(T.BYTEA, -1, placeholder="hexagon").placeholder) == b"hexagon"


@pytest.mark.parametrize("bad", ["hex:abc", "hex:zz", "hex:0g"])
def test_malformed_hex_is_refused_at_start_naming_the_option(bad):
    with pytest.raises(CdcConfigError, match="unavailable.value.placeholder"):
        CdcConfig.from_options({"topic.prefix": "p", "unavailable.value.placeholder": bad})
    with pytest.raises(DeltaConfigError, match="unavailable.value.placeholder"):
        delta_config.from_config({"delta.root.path": "/tmp/x", "unavailable.value.placeholder": bad})


def test_the_delta_sink_recognises_the_hex_placeholder_in_bytes_text_and_arrays():
    assert converter({"type": "bytes"}, HEX)(base64.b64encode(RAW).decode()) is UNAVAILABLE
    assert converter({"type": "string"}, HEX)(RAW.decode("utf-8", errors="replace")) is UNAVAILABLE
    assert converter({"type": "array", "items": {"type": "int32"}}, HEX)([-54, -2, 0, -1, 65]) is UNAVAILABLE
    assert converter({"type": "string"}, HEX)(HEX) == HEX        # the option's text is data, not the marker
