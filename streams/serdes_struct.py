"""Riverlog's columnar serde: a value is an Arrow IPC stream holding one record batch of one row
whose schema is the struct's fields (Arrow types as Spark maps them: ``to_arrow_schema``, UTC
timestamps in microseconds). It carries types JSON cannot (binary, timestamps, decimals) and is
read by any Arrow implementation. Python values are dicts, as ``pyarrow``'s ``to_pylist`` gives
them.

The Spark side has no built-in Arrow reader, so ``decode``/``encode`` are Arrow UDFs: Python
runs once per batch of rows, handing whole arrays over, and both sides call the same two
functions below, so their bytes are equal. Reading checks the stream's schema equals the serde's;
a stream of another schema or more than one row is a :class:`SerializationError`.
"""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import types as T

from streams.serde_base import Serde, topic_name
from streams.serdes_schema import struct_schema


@dataclass(frozen=True, repr=False)
class StructSerde(Serde):
    schema: T.StructType = None
    kafka_name = "Struct"

    @classmethod
    def of(cls, schema) -> "StructSerde":
        return cls(struct_schema(schema, "Struct schema"))

    @property
    def name(self) -> str:
        return f"Struct<{self.schema.simpleString()}>"

    def __repr__(self) -> str:
        return f"Serdes.Struct({self.schema.simpleString()!r})"

    def arrow_schema(self):
        from pyspark.sql.pandas.types import to_arrow_schema
        return to_arrow_schema(self.schema, timezone="UTC")

    # ------------------------------------------------------------------------------ Python side
    def _serialize(self, obj) -> bytes:
        import pyarrow as pa
        if not isinstance(obj, dict):
            raise TypeError("not a dict")
        schema = self.arrow_schema()
        try:
            batch = pa.RecordBatch.from_pylist([obj], schema=schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as e:
            raise ValueError(str(e)) from None
        return _write(batch)

    def _deserialize(self, data: bytes, topic):
        import pyarrow as pa
        try:
            batch = _read(data, self.arrow_schema())
        except (pa.ArrowException, OSError, ValueError, _WrongShape) as e:
            raise self.error(f"not an Arrow stream of one {self.schema.simpleString()} row: {e}", topic,
                             length=len(data)) from None
        return batch.to_pylist()[0]

    # ------------------------------------------------------------------------------- Spark side
    def spark_type(self):
        return self.schema

    def _decode(self, col, on_error, topic):
        from pyspark.sql import functions as F
        return F.arrow_udf(_decoder(self, on_error, topic_name(topic)), self.schema)(col)

    def _encode(self, col):
        from pyspark.sql import functions as F
        return F.arrow_udf(_encoder(self), T.BinaryType())(col)


class _WrongShape(Exception):
    pass


def _write(batch) -> bytes:
    import pyarrow as pa
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


def _read(data: bytes, schema):
    import pyarrow as pa
    reader = pa.ipc.open_stream(pa.py_buffer(data))
    if not reader.schema.equals(schema):
        raise _WrongShape(f"its schema is {reader.schema.to_string(show_schema_metadata=False)!r}")
    table = reader.read_all()
    if table.num_rows != 1:
        raise _WrongShape(f"it holds {table.num_rows} rows")
    return table.combine_chunks().to_batches()[0]


def _decoder(serde: StructSerde, on_error: str, topic):
    def decode(values):
        import pyarrow as pa
        schema = serde.arrow_schema()
        struct_type = pa.struct(list(schema))
        parts = []
        for data in values:
            raw = data.as_py()
            if raw is None:
                parts.append(pa.nulls(1, struct_type))
                continue
            try:
                batch = _read(raw, schema)
            except (pa.ArrowException, OSError, ValueError, _WrongShape) as e:
                if on_error == "null":
                    parts.append(pa.nulls(1, struct_type))
                    continue
                raise serde.error(f"not an Arrow stream of one {serde.schema.simpleString()} row: {e}", topic,
                                  length=len(raw)) from None
            parts.append(pa.StructArray.from_arrays(batch.columns, fields=list(schema)))
        if not parts:
            return pa.array([], struct_type)
        return pa.concat_arrays(parts)
    return decode


def _encoder(serde: StructSerde):
    def encode(values):
        import pyarrow as pa
        schema = serde.arrow_schema()
        # Row by row through the same path as serialize(), so both write the same bytes.
        out = [None if row is None else _write(pa.RecordBatch.from_pylist([row], schema=schema))
               for row in values.cast(pa.struct(list(schema))).to_pylist()]
        return pa.array(out, pa.binary())
    return encode
