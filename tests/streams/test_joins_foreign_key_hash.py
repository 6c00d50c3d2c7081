"""The left value's hash that tells a foreign-key answer is stale: Kafka hashes the serialized
value, so any value its serde writes joins. Values outside the plain types (a ``uuid.UUID``, a
struct with decimals and timestamps, an object a ``mapValues`` made) join too, and an answer for
an earlier such value is still dropped."""
from __future__ import annotations

import datetime
import decimal
import uuid
from dataclasses import dataclass

import pytest

from streams import Consumed, Produced, Serdes, StreamsBuilder
from streams.testing import TopologyTestDriver

pytestmark = pytest.mark.unit
S = Serdes.String()


def _driver(value_serde, extractor, map_values=None):
    b = StreamsBuilder()
    left = b.table("left", Consumed.with_(S, value_serde))
    if map_values is not None:
        left = left.mapValues(map_values)
    right = b.table("right", Consumed.with_(S, S))
    left.join(right, extractor, lambda l, r: f"{extractor(l)}:{r}").toStream().to("out", Produced.with_(S, S))
    d = TopologyTestDriver(b.build(), {"application.id": "fk-hash"})
    return d, d.createInputTopic("left", S, value_serde), d.createInputTopic("right", S, S), \
        d.createOutputTopic("out", S, S)


def test_uuid_left_values_join():
    d, lt, rt, out = _driver(Serdes.UUID(), lambda v: "A" if v.int % 2 else "B")
    rt.pipeInput("A", "a", 0)
    rt.pipeInput("B", "b", 0)
    odd, even = uuid.UUID(int=7), uuid.UUID(int=8)
    lt.pipeInput("l1", odd, 1)
    lt.pipeInput("l1", even, 2)
    assert out.readKeyValuesToList() == [("l1", "A:a"), ("l1", "B:b")]


def test_struct_left_values_with_decimals_and_timestamps_join():
    serde = Serdes.Struct("fk string, at timestamp, amount decimal(10,2)")
    d, lt, rt, out = _driver(serde, lambda v: v["fk"])
    rt.pipeInput("A", "a", 0)
    at = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    lt.pipeInput("l1", {"fk": "A", "at": at, "amount": decimal.Decimal("1.50")}, 1)
    rt.pipeInput("A", "apple", 2)
    assert out.readKeyValuesToList() == [("l1", "A:a"), ("l1", "A:apple")]


@dataclass(frozen=True)
class Line:
    fk: str
    qty: int


def test_objects_made_by_map_values_join_and_stale_answers_are_dropped():
    """No serde writes ``Line``: it is hashed by its pickle. The row flips A→B→A with the answers
    held back (the registration topic has several partitions): only the answer for the last
    value is joined."""
    from streams.interpreter import Interpreter
    b = StreamsBuilder()
    left = b.table("left", Consumed.with_(S, S)).mapValues(lambda v: Line(v.split(":")[0], int(v.split(":")[1])))
    right = b.table("right", Consumed.with_(S, S))
    left.join(right, lambda v: v.fk, lambda l, r: f"{l.fk}{l.qty}:{r}").toStream().to("out", Produced.with_(S, S))
    interp = Interpreter(b.build(), {"application.id": "fk-hash"}, {"left": 2, "right": 3})
    for k, v, ts in [("A", "a", 0), ("B", "b", 1)]:
        interp.append("right", S.serialize(k), S.serialize(v), ts)
    interp.run()
    for i, fk in enumerate("ABA"):
        interp.append("left", S.serialize("l1"), S.serialize(f"{fk}:{i}"), 10 + i)
    interp.run()
    out = [(S.deserialize(k), S.deserialize(v)) for p in interp.topics["out"] for k, v, _, _ in p]
    assert out == [("l1", "A2:a")]
