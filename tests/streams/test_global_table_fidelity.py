"""GlobalKTable semantics against Kafka's ``KStreamGlobalKTableJoinTest``,
``KStreamGlobalKTableLeftJoinTest``, ``KStreamKTableJoinProcessor`` (KAFKA-10277, KAFKA-19208)
and ``GlobalKTableImpl``: what a key selector answering null does, null keys on either side, null
values in the global topic, and the store name a GlobalKTable exposes."""
from __future__ import annotations

import pytest

from streams import Consumed, Materialized, Produced, StreamsBuilder
from streams.testing import TopologyTestDriver
from tests.streams.join_kit import S, show

pytestmark = pytest.mark.unit


def _fk(key, value):
    """The tests' key selector: ``"X1,FKey1"`` joins ``FKey1``; a value without one, nothing."""
    parts = value.split(",") if value is not None else ()
    return parts[1] if len(parts) > 1 else None


def _join(kind: str, materialized=None):
    b = StreamsBuilder()
    g = b.globalTable("global", Consumed.with_(S, S), materialized)
    stream = b.stream("stream", Consumed.with_(S, S))
    getattr(stream, kind)(g, _fk, show).to("out", Produced.with_(S, S))
    d = TopologyTestDriver(b.build(), {"application.id": "g"}, partitions={"stream": 2, "global": 3})
    return (g, d, d.createInputTopic("stream", S, S), d.createInputTopic("global", S, S),
            d.createOutputTopic("out", S, S))


def _out(out) -> list[tuple]:
    return [(r.key, r.value) for r in out.readRecordsToList()]


def test_a_left_join_joins_a_record_whose_selector_answers_null_with_null():
    """KAFKA-19208 (``KStreamKTableJoinProcessor.maybeDropRecord``): a left join drops only a
    null value; a null join key means "no match", joined with null, whatever the record's key."""
    _, _, stream, table, out = _join("leftJoin")
    table.pipeInput("FKey1", "Y1", 0)
    stream.pipeInput("k0", "X0", 1)              # no foreign key in the value
    stream.pipeInput(None, "X2", 2)              # no record key either
    stream.pipeInput("k1", "X1,FKey1", 3)
    stream.pipeInput("k3", None, 4)              # a null value is still dropped
    assert _out(out) == [("k0", "X0 - null"), (None, "X2 - null"), ("k1", "X1,FKey1 - Y1")]


def test_an_inner_join_drops_a_null_selector_answer_and_joins_a_null_key_with_a_match():
    """KStreamGlobalKTableJoinTest.shouldNotJoinOnNullKeyMapperValues and
    shouldJoinOnNullKeyWithNonNullKeyMapperValues (KAFKA-10277)."""
    _, _, stream, table, out = _join("join")
    table.pipeInput("FKey1", "Y1", 0)
    stream.pipeInput("k0", "X0", 1)
    stream.pipeInput(None, "X1,FKey1", 2)
    stream.pipeInput("k2", "X2,FKey2", 3)        # a key the table does not hold
    assert _out(out) == [(None, "X1,FKey1 - Y1")]


def test_the_global_topic_skips_null_keys_and_deletes_on_null_values():
    """KStreamGlobalKTableJoinTest.shouldClearGlobalTableEntryOnNullValueUpdates; a null-key
    record of the global topic is skipped, as ``KTableSource`` skips it."""
    _, d, stream, table, out = _join("leftJoin", Materialized.as_("regions"))
    table.pipeInput("FKey1", "Y1", 0)
    table.pipeInput(None, "orphan", 1)
    stream.pipeInput("k1", "X1,FKey1", 2)
    table.pipeInput("FKey1", None, 3)
    stream.pipeInput("k1", "X1,FKey1", 4)
    assert _out(out) == [("k1", "X1,FKey1 - Y1"), ("k1", "X1,FKey1 - null")]
    assert d.getKeyValueStore("regions").all() == []


def test_global_table_updates_never_trigger_the_join():
    """KStreamGlobalKTableJoinTest.shouldNotJoinOnGlobalTableUpdates."""
    _, _, stream, table, out = _join("leftJoin")
    stream.pipeInput("k1", "X1,FKey1", 1)
    table.pipeInput("FKey1", "Y1", 2)
    assert _out(out) == [("k1", "X1,FKey1 - null")]


def test_queryable_store_name_is_the_given_name_or_none():
    """``GlobalKTableImpl.queryableStoreName`` is ``MaterializedInternal.queryableStoreName()``:
    the name given with ``Materialized.as_``, else null (a generated name is no contract)."""
    g, d, *_ = _join("join")
    assert g.queryableStoreName() is None
    named, d, _, table, _ = _join("join", Materialized.as_("regions"))
    assert named.queryableStoreName() == "regions"
    table.pipeInput("EU", "euro", 1)
    assert d.getKeyValueStore("regions").get("EU") == "euro"
    serdes_only, *_ = _join("join", Materialized.with_(S, S))
    assert serdes_only.queryableStoreName() is None


def test_a_global_table_is_read_from_the_beginning_whatever_the_reset_policy_says():
    """Kafka's global consumer runs with ``auto.offset.reset=none`` and seeks to the beginning
    (``GlobalStateManagerImpl``): a GlobalKTable ignores ``auto.offset.reset`` and
    ``Consumed.withOffsetResetPolicy``; the application's other sources follow them."""
    from streams.app import StreamsApp
    b = StreamsBuilder()
    g = b.globalTable("g", Consumed.with_(S, S).withOffsetResetPolicy("latest"))
    b.stream("s", Consumed.with_(S, S)).join(g, lambda k, v: k, lambda v, gv: v).to("out", Produced.with_(S, S))
    app = StreamsApp(b.build(), None, {"application.id": "a", "bootstrap.servers": "127.0.0.1:1",
                                       "auto.offset.reset": "latest"})
    assert (app._reset("g"), app._reset("s")) == (-2, -1)
