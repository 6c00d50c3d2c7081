"""Kafka Connect's converters as Spark column expressions, under Kafka's class names: the
StringConverter and ByteArrayConverter, the registry by class name (:func:`converter`, for
``key.converter`` / ``value.converter``), and :func:`decode` and :func:`encode`, which apply a
converter to a record frame's ``key`` or ``value`` and set the frame's error column (see
:mod:`connect.record_frame`). The interface and its :class:`Converted` result are in
:mod:`connect.converter_base`; Kafka's JsonConverter, and how a JSON column is bound to a Spark
type, in :mod:`connect.json_converter`.
"""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, StringType

from connect import record_frame
from connect.connect_types import OPTIONAL
from connect.converter_base import Converted, Converter
from connect.errors import ConfigError, DataError
from connect.json_converter import JSON_CONVERTER, JsonConverter, NothingToBind  # noqa: F401 (public here too)
from connect.json_values import _mismatch, default_value, parse_json  # noqa: F401 (public here too)

STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"
BYTE_ARRAY_CONVERTER = "org.apache.kafka.connect.converters.ByteArrayConverter"


class ByteArrayConverter(Converter):
    """Bytes through unchanged; a typed value other than bytes is refused when the query is planned.
    Read values have Kafka's ``Schema.OPTIONAL_BYTES_SCHEMA`` (``metadata``), so transforms take
    their ``applyWithSchema`` path on them."""
    class_name = BYTE_ARRAY_CONVERTER
    metadata = {OPTIONAL: True}

    def to_column(self, binary):
        return Converted(binary, F.lit(False), F.lit(None).cast("string"))

    def from_column(self, typed, data_type, metadata=None, typed_null=None):
        if not isinstance(data_type, BinaryType):
            raise DataError(f"ByteArrayConverter is not compatible with objects of type {data_type.simpleString()}")
        return Converted(typed, F.lit(False), F.lit(None).cast("string"))

    def output_type(self):
        return BinaryType()


_ENCODINGS = {"UTF-8", "UTF8", "US-ASCII", "ISO-8859-1", "UTF-16", "UTF-16BE", "UTF-16LE", "UTF-32"}


_UNMAPPABLE = {"US-ASCII": "[^\\x{00}-\\x{7F}]", "ISO-8859-1": "[^\\x{00}-\\x{FF}]"}


class StringConverter(Converter):
    """Kafka's StringConverter (``converter.encoding``, default UTF-8). Bytes that are not valid
    UTF-8 are flagged (Java would substitute U+FFFD); in US-ASCII and ISO-8859-1 what the charset
    cannot hold is substituted as Java's ``String(bytes, charset)`` / ``getBytes(charset)`` do
    (U+FFFD when reading, ``?`` when writing) where Spark's ``decode``/``encode`` would fail the
    job; non-string values are written as Spark's
    ``CAST(… AS STRING)``, where Java writes ``toString()`` (``Struct{a=1}`` against ``{1}``).
    Read values have Kafka's ``Schema.OPTIONAL_STRING_SCHEMA`` (``metadata``), so transforms take
    their ``applyWithSchema`` path on them (SetSchemaMetadata names them)."""
    class_name = STRING_CONVERTER
    metadata = {OPTIONAL: True}

    def __init__(self, config=None, is_key=False):
        super().__init__(config, is_key)
        name = "key.converter.encoding" if is_key and "key.converter.encoding" in self.config else (
            "value.converter.encoding" if not is_key and "value.converter.encoding" in self.config
            else "converter.encoding")
        self.encoding = str(self.config.get(name, "UTF-8")).upper()
        if self.encoding not in _ENCODINGS:
            raise ConfigError(f"{name}: unsupported encoding {self.encoding!r}",
                              errors={name: [f"expected one of {sorted(_ENCODINGS)}"]})

    def to_column(self, binary):
        if self.encoding in ("UTF-8", "UTF8"):
            bad = binary.isNotNull() & ~F.call_function("is_valid_utf8", binary)
            return Converted(F.when(~bad, binary.cast("string")), bad,
                             F.lit("Failed to deserialize data to string: invalid UTF-8"))
        if self.encoding == "US-ASCII":   # ISO-8859-1 maps every byte: bytes past ASCII become U+FFFD
            text = F.regexp_replace(F.decode(binary, "ISO-8859-1"), "[\\x{80}-\\x{FF}]", "\uFFFD")
            return Converted(text, F.lit(False), F.lit(None).cast("string"))
        return Converted(F.decode(binary, self.encoding), F.lit(False), F.lit(None).cast("string"))

    def from_column(self, typed, data_type, metadata=None, typed_null=None):
        text = typed if isinstance(data_type, StringType) else typed.cast("string")
        unmappable = _UNMAPPABLE.get(self.encoding)
        if unmappable:   # one '?' per code point the charset lacks, as Java's encoder replaces it
            text = F.regexp_replace(text, unmappable, "?")
        return Converted(F.encode(text, self.encoding), F.lit(False), F.lit(None).cast("string"))

    def output_type(self):
        return StringType()


CONVERTERS = {c.class_name: c for c in (JsonConverter, StringConverter, ByteArrayConverter)}


def converter(class_name: str, config: dict | None = None, is_key: bool = False, **kwargs) -> Converter:
    """A converter by Kafka's class name (``key.converter`` / ``value.converter``)."""
    try:
        cls = CONVERTERS[class_name]
    except KeyError:
        field = "key.converter" if is_key else "value.converter"
        raise ConfigError(f"{field}: unknown converter class {class_name!r}; known: {sorted(CONVERTERS)}",
                          errors={field: [f"Class {class_name} could not be found."]}) from None
    return cls(config, is_key, **kwargs) if cls is JsonConverter else cls(config, is_key)


def decode(frame: DataFrame, conv: Converter, column: str = "value") -> DataFrame:
    """``frame[column]`` bytes → typed (Kafka's ``toConnectData``), failing rows flagged."""
    r = conv.to_column(F.col(column))
    hidden: list[str] = []
    for stage in r.stages:
        frame = frame.select("*", *[c.alias(name) for name, c in stage.items()])
        hidden += stage
    replace = {column: record_frame.fence(r.value) if hidden else r.value}
    if r.typed_null is not None:
        replace[record_frame.typed_null(column)] = r.typed_null
    if r.misfit is None:
        out = record_frame.flag(frame, r.failed, f"{column}.converter", conv.class_name, r.message, replace, hidden)
    else:
        stage = F.when(r.misfit, F.lit(record_frame.REBIND)).otherwise(F.lit(f"{column}.converter"))
        message = F.when(r.misfit, F.lit(f"{column} does not fit the type carried from an earlier batch")).otherwise(
            r.message)
        out = record_frame.flag(frame, r.failed | r.misfit, stage, conv.class_name, message, replace, hidden)
    meta = getattr(conv, "metadata", None)
    return out.withMetadata(column, meta) if meta else out


def encode(frame: DataFrame, conv: Converter, column: str = "value") -> DataFrame:
    """``frame[column]`` typed → bytes (Kafka's ``fromConnectData``), failing rows flagged."""
    field, marker = frame.schema[column], record_frame.typed_null(column)
    typed_null = F.col(marker) if marker in frame.columns else None
    r = conv.from_column(F.col(column), field.dataType, field.metadata, typed_null)
    return record_frame.flag(frame, r.failed, f"{column}.converter", conv.class_name, r.message, {column: r.value},
                             drop=(marker,))
