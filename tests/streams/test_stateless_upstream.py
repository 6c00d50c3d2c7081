"""Stateless operations, naming and stream–table/GlobalKTable joins against the scenarios of
Kafka Streams' own unit tests (KStreamImplTest, KStreamSplitTest, KStreamMapTest,
KStreamKTableLeftJoinTest, GlobalKTableJoinsTest, NamedTest, KStreamPrintTest, PrintedTest), run
through ``TopologyTestDriver``."""
from __future__ import annotations

import pytest

from streams import Branched, Consumed, Joined, Materialized, Named, Produced, Serdes, StreamsBuilder, TopologyError
from streams.testing import TopologyTestDriver

pytestmark = pytest.mark.unit
S, I = Serdes.String(), Serdes.Integer()


def _driver(b, **config):
    return TopologyTestDriver(b.build(), {"application.id": "app", **config})


# ---------------------------------------------------------------------- to(TopicNameExtractor)
def test_a_topic_extractor_reads_the_input_records_topic_partition_and_offset():
    """KStreamImplTest.shouldSendDataToDynamicTopics: ``(key, value, context) -> context.topic()
    + "-" + key + "-" + value.charAt(0)``; Kafka's RecordContext gives the topic, partition,
    offset, timestamp and headers of the record being processed."""
    b = StreamsBuilder()
    seen = []

    def extractor(key, value, context):
        seen.append((context.topic, context.partition, context.offset, context.timestamp, context.headers))
        return f"{context.topic}-{key}-{value[0]}"
    b.stream("topic", Consumed.with_(S, S)).to(extractor, Produced.with_(S, S))
    d = _driver(b)
    source = d.createInputTopic("topic", S, S)
    source.pipeInput("a", "v1", 0)
    source.pipeInput("a", "v2", 0, headers=[("h", b"1")])
    source.pipeInput("b", "v1", 5)
    assert d.createOutputTopic("topic-a-v", S, S).readKeyValuesToList() == [("a", "v1"), ("a", "v2")]
    assert d.createOutputTopic("topic-b-v", S, S).readKeyValuesToList() == [("b", "v1")]
    assert seen == [("topic", 0, 0, 0, ()), ("topic", 0, 1, 0, (("h", b"1"),)), ("topic", 0, 2, 5, ())]


# ---------------------------------------------------------------------- Named
@pytest.mark.parametrize("name", [None, "", "foo bar", "..", ".", "foo:bar", "foo=bar", "a" * 250])
def test_named_refuses_a_null_or_illegal_name(name):
    """NamedTest: ``Named.as(null)`` throws ("name can't be null"); ``""``, ``"foo bar"``,
    ``".."``, ``"."``, ``"foo:bar"``, ``"foo=bar"`` and 250 characters are illegal."""
    with pytest.raises(TopologyError) as e:
        Named.as_(name)
    if name is None:
        assert "name can't be null" in str(e.value)


def test_named_accepts_a_legal_name_and_names_the_processor():
    b = StreamsBuilder()
    b.stream("in", Consumed.with_(S, S)).filter(lambda k, v: True, Named.as_("a.b_c-" + "x" * 243)).to("out")
    assert "Processor: a.b_c-" + "x" * 243 + " " in str(b.build().describe())


# ---------------------------------------------------------------------- stream–table left join
def _left_join():
    b = StreamsBuilder()
    stream, table = b.stream("stream", Consumed.with_(I, S)), b.table("table", Consumed.with_(I, S))
    stream.leftJoin(table, lambda v1, v2: f"{v1}+{'null' if v2 is None else v2}").to("out", Produced.with_(I, S))
    d = _driver(b)
    streams, tables = d.createInputTopic("stream", I, S), d.createInputTopic("table", I, S)
    out = d.createOutputTopic("out", I, S)

    def push_stream(n, prefix):
        for i in range(n):
            streams.pipeInput(i, f"{prefix}{i}", i)
        return [(r.key, r.value, r.timestamp) for r in out.readRecordsToList()]

    def push_table(n, prefix):
        for i in range(n):     # Kafka's test: random timestamps, which a plain table lookup ignores
            tables.pipeInput(i, None if prefix is None else f"{prefix}{i}", (i * 7919 + 13) % 100_000)
        return out.readRecordsToList()
    return push_stream, push_table


def test_stream_table_left_join_joins_on_stream_updates_only():
    """KStreamKTableLeftJoinTest.shouldJoinWithEmptyTableOnStreamUpdates/shouldNotJoinOnTableUpdates
    (guard, already matched)."""
    push_stream, push_table = _left_join()
    assert push_stream(2, "X") == [(0, "X0+null", 0), (1, "X1+null", 1)]
    assert push_table(2, "Y") == []
    assert push_stream(4, "X") == [(0, "X0+Y0", 0), (1, "X1+Y1", 1), (2, "X2+null", 2), (3, "X3+null", 3)]
    assert push_table(4, "YY") == []
    assert push_stream(4, "X") == [(0, "X0+YY0", 0), (1, "X1+YY1", 1), (2, "X2+YY2", 2), (3, "X3+YY3", 3)]


def test_stream_table_left_join_after_table_deletes():
    """KStreamKTableLeftJoinTest.shouldClearTableEntryOnNullValueUpdates (guard, already matched)."""
    push_stream, push_table = _left_join()
    push_table(4, "Y")
    assert push_stream(4, "X") == [(0, "X0+Y0", 0), (1, "X1+Y1", 1), (2, "X2+Y2", 2), (3, "X3+Y3", 3)]
    assert push_table(2, None) == []
    assert push_stream(4, "XX") == [(0, "XX0+null", 0), (1, "XX1+null", 1), (2, "XX2+Y2", 2), (3, "XX3+Y3", 3)]


@pytest.mark.parametrize("kind, expected", [
    ("join", {"1": ("a+A", 2), "2": ("b+B", 10)}),
    ("leftJoin", {"1": ("a+A", 2), "2": ("b+B", 10), "3": ("c+null", 3)}),
])
def test_stream_global_table_joins(kind, expected):
    """GlobalKTableJoinsTest: the key selector is the value; the result has the stream record's
    key and timestamp (guard, already matched)."""
    b = StreamsBuilder()
    table = b.globalTable("global", Consumed.with_(S, S))
    stream = b.stream("stream", Consumed.with_(S, S))
    getattr(stream, kind)(table, lambda k, v: v, lambda v1, v2: f"{v1}+{'null' if v2 is None else v2}") \
        .to("out", Produced.with_(S, S))
    d = _driver(b)
    g = d.createInputTopic("global", S, S)
    g.pipeInput("a", "A", 1)
    g.pipeInput("b", "B", 5)
    s = d.createInputTopic("stream", S, S)
    for key, value, ts in (("1", "a", 2), ("2", "b", 10), ("3", "c", 3)):
        s.pipeInput(key, value, ts)
    assert {r.key: (r.value, r.timestamp) for r in d.createOutputTopic("out", S, S).readRecordsToList()} == expected


# ---------------------------------------------------------------------- split, merge, map
def _split_input(b):
    d = _driver(b)
    source = d.createInputTopic("topic", I, S)
    for k in (-1, 0, 1, 2, 3, 4, 5, 6, 7):
        source.pipeInput(k, f"V{k}", 0)
    return d


def test_split_result_map_and_branch_names():
    """KStreamSplitTest.testResultingMap (guard, already matched)."""
    b = StreamsBuilder()
    branches = (b.stream("topic", Consumed.with_(I, S)).split(Named.as_("foo-"))
                .branch(lambda k, v: k % 2 == 0, Branched.as_("bar"))
                .branch(lambda k, v: k % 3 == 0, Branched.withConsumer(lambda ks: None))
                .branch(lambda k, v: k % 5 == 0, Branched.withFunction(lambda ks: None))
                .branch(lambda k, v: k < 0, Branched.withFunction(lambda ks: ks))
                .branch(lambda k, v: k % 7 == 0)
                .defaultBranch())
    assert sorted(branches) == ["foo-0", "foo-4", "foo-5", "foo-bar"]
    for name, branch in branches.items():
        branch.to(name, Produced.with_(I, S))
    d = _split_input(b)
    got = {t: d.createOutputTopic(t, I, S).readValuesToList() for t in sorted(branches)}
    assert got == {"foo-bar": ["V0", "V2", "V4", "V6"], "foo-4": ["V-1"], "foo-5": ["V7"], "foo-0": ["V1"]}


def test_split_without_a_default_branch_drops_what_no_branch_takes():
    """KStreamSplitTest.testKStreamSplit/testBranchingWithNoTerminalOperation (guard, already
    matched): -1, 1 and 7 match no predicate and go nowhere."""
    b = StreamsBuilder()
    (b.stream("topic", Consumed.with_(I, S)).split()
     .branch(lambda k, v: k % 2 == 0, Branched.withConsumer(lambda ks: ks.to("output", Produced.with_(I, S))))
     .branch(lambda k, v: k % 5 == 0, Branched.withConsumer(lambda ks: ks.to("output", Produced.with_(I, S)))))
    d = _split_input(b)
    assert d.createOutputTopic("output", I, S).readValuesToList() == ["V0", "V2", "V4", "V5", "V6"]


def test_merge_keeps_each_records_timestamp_in_processing_order():
    """KStreamImplTest.shouldMergeMultipleStreams (guard, already matched)."""
    b = StreamsBuilder()
    s = [b.stream(f"topic-{i}", Consumed.with_(S, S)) for i in range(1, 5)]
    s[0].merge(s[1]).merge(s[2]).merge(s[3]).to("out", Produced.with_(S, S))
    d = _driver(b)
    inputs = [d.createInputTopic(f"topic-{i}", S, S) for i in range(1, 5)]
    for topic, key, ts in ((0, "A", 1), (1, "B", 9), (2, "C", 2), (3, "D", 8), (3, "E", 3), (2, "F", 7),
                           (1, "G", 4), (0, "H", 6)):
        inputs[topic].pipeInput(key, key.lower() * 2, ts)
    got = [(r.key, r.value, r.timestamp) for r in d.createOutputTopic("out", S, S).readRecordsToList()]
    assert got == [("A", "aa", 1), ("B", "bb", 9), ("C", "cc", 2), ("D", "dd", 8), ("E", "ee", 3),
                   ("F", "ff", 7), ("G", "gg", 4), ("H", "hh", 6)]


def test_map_keeps_the_timestamp_and_refuses_a_null_result():
    """KStreamMapTest.testMap/testKeyValueMapperResultNotNull (guard, already matched)."""
    from streams import StreamsError
    b = StreamsBuilder()
    b.stream("topic", Consumed.with_(I, S)).map(lambda k, v: (v, k)).to("out", Produced.with_(S, I))
    d = _driver(b)
    source = d.createInputTopic("topic", I, S)
    for k in range(4):
        source.pipeInput(k, f"V{k}", 10 - k)
    got = [(r.key, r.value, r.timestamp) for r in d.createOutputTopic("out", S, I).readRecordsToList()]
    assert got == [("V0", 0, 10), ("V1", 1, 9), ("V2", 2, 8), ("V3", 3, 7)]
    b = StreamsBuilder()
    b.stream("topic", Consumed.with_(I, S)).map(lambda k, v: None).to("out", Produced.with_(S, I))
    with pytest.raises(StreamsError, match="returned None"):
        _driver(b).createInputTopic("topic", I, S).pipeInput(0, "K", 0)


# ---------------------------------------------------------------------- print
def _print(printed, records=(("good", 2),), key_serde=S, value_serde=I, upstream=None):
    b = StreamsBuilder()
    stream = b.stream("in", Consumed.with_(key_serde, value_serde))
    (upstream(stream) if upstream else stream).print(printed)
    d = _driver(b)
    source = d.createInputTopic("in", key_serde, value_serde)
    for k, v in records:
        source.pipeInput(k, v, 0)
    return b


def test_print_writes_label_key_and_value_lines_to_standard_output(capsys):
    """KStreamPrintTest/PrintedTest.shouldCreateProcessorThatPrintsToStdOut: ``[label]: key, value``;
    the label defaults to the name of the processor printed from (Kafka's ``KStreamImpl.print``
    builds the printer with its stream's name), null as Java prints it."""
    from streams.printed import Printed
    b = _print(Printed.toSysOut(), [("good", 2), ("bad", None)])
    assert capsys.readouterr().out == "[KSTREAM-SOURCE-0000000000]: good, 2\n[KSTREAM-SOURCE-0000000000]: bad, null\n"
    assert "Processor: KSTREAM-PRINTER-0000000001 (stores: [])" in str(b.build().describe())
    _print(Printed.toSysOut().withLabel("label"), [("hello", 3)],
           upstream=lambda s: s.filter(lambda k, v: True))
    assert capsys.readouterr().out == "[label]: hello, 3\n"
    from streams import TimeWindows
    _print(Printed.toSysOut().withLabel("w"), [("k", 1), ("k", 2)],
           upstream=lambda s: s.groupByKey().windowedBy(TimeWindows.ofSizeWithNoGrace(10)).count().toStream())
    assert capsys.readouterr().out == "[w]: [k@0/10], 1\n[w]: [k@0/10], 2\n"     # Windowed.toString


def test_print_with_a_key_value_mapper_and_a_name(capsys):
    """PrintedTest.shouldPrintWithKeyValueMapper; KStreamPrintTest's ``"%d, %s"`` mapper; a SQL
    mapper as every operation takes; ``withName`` names the printer."""
    from streams.printed import Printed
    b = _print(Printed.toSysOut().withKeyValueMapper(lambda k, v: f"{k} -> {v}").withName("printer"),
               [("hello", 1)])
    assert capsys.readouterr().out == "[KSTREAM-SOURCE-0000000000]: hello -> 1\n"
    assert "Processor: printer (stores: [])" in str(b.build().describe())
    _print(Printed.toSysOut().withLabel("test-stream").withKeyValueMapper("concat(key, ' = ', value)"),
           [(0, "zero"), (1, "one")], I, S)
    assert capsys.readouterr().out == "[test-stream]: 0 = zero\n[test-stream]: 1 = one\n"


def test_print_to_a_file(tmp_path):
    """PrintedTest.shouldCreateProcessorThatPrintsToFile: ``toFile`` truncates the file, as Kafka
    opens it there."""
    from streams.printed import Printed
    path = tmp_path / "out.txt"
    path.write_text("old\n")
    printed = Printed.toFile(str(path)).withLabel("processor")
    assert path.read_text() == ""
    _print(printed, [("hi", 1), ("ho", 2)])
    assert path.read_text() == "[processor]: hi, 1\n[processor]: ho, 2\n"


@pytest.mark.parametrize("make, message", [
    (lambda P: P.toFile(None), "filePath can't be null"),
    (lambda P: P.toFile(""), "filePath can't be an empty string"),
    (lambda P: P.toFile("/this/should/not/exist"), r"Unable to write stream to file at \[/this/should/not/exist\]"),
    (lambda P: P.toSysOut().withKeyValueMapper(None), "mapper can't be null"),
    (lambda P: P.toSysOut().withLabel(None), "label can't be null"),
    (lambda P: StreamsBuilder().stream("in").print(None), "printed can't be null"),
])
def test_printed_refuses_what_kafkas_printed_refuses(make, message):
    """PrintedTest: a null file path, mapper or label (NullPointerException), an empty or
    unwritable path (TopologyException); KStreamImplTest: ``print(null)``."""
    from streams.printed import Printed
    with pytest.raises(TopologyError, match=message):
        make(Printed)


# ---------------------------------------------------------------------- serdes through a join
@pytest.mark.parametrize("kind", ["join", "leftJoin"])
def test_a_stream_table_join_result_takes_the_joined_key_serde(kind):
    """KStreamImplTest.shouldPreserveSerdesForOperators: ``stream.join(table, joiner,
    Joined.with(mySerde, ...)).keySerde()`` is ``mySerde`` (``doStreamTableJoin``), so a sink with
    no serdes of its own writes the key with it."""
    b = StreamsBuilder()
    stream, table = b.stream("s", Consumed.with_(S, S)), b.table("t", Consumed.with_(S, S))
    joined = getattr(stream, kind)(table, lambda v1, v2: f"{v1}+{v2}", Joined.with_(Serdes.Json(), S, S))
    assert isinstance(joined.key_serde, type(Serdes.Json()))
    joined.to("out", Produced.valueSerde(S))
    d = _driver(b)
    d.createInputTopic("t", S, S).pipeInput("k", "T", 0)
    d.createInputTopic("s", S, S).pipeInput("k", "S", 1)
    assert d.createOutputTopic("out", Serdes.ByteArray(), S).readKeyValuesToList() == [(b'"k"', "S+T")]


def test_merge_forgets_both_serdes_as_kafkas():
    """KStreamImplTest.shouldPreserveSerdesForOperators: ``stream1.merge(stream1)`` has no key or
    value serde (Kafka's ``merge``: "we cannot safely use either one to represent both streams"),
    so a sink with no serdes of its own writes with the defaults."""
    b = StreamsBuilder()
    merged = b.stream("a", Consumed.with_(S, S)).merge(b.stream("b", Consumed.with_(S, S)))
    assert (merged.key_serde, merged.value_serde) == (None, None)
    merged.to("out")
    d = _driver(b, **{"default.key.serde": "String", "default.value.serde": "Json"})
    d.createInputTopic("a", S, S).pipeInput("k", "v", 0)
    assert d.createOutputTopic("out", S, Serdes.ByteArray()).readKeyValuesToList() == [("k", b'"v"')]
    with pytest.raises(TopologyError, match="has no value serde"):
        _driver(b, **{"default.key.serde": "String"})


def test_a_stream_stream_join_result_has_only_the_stream_joined_key_serde():
    """KStreamImplTest.shouldPreserveSerdesForOperators: a stream–stream join's result takes
    ``StreamJoined``'s key serde, else none (``KStreamImplJoin``), so its sink falls back on
    ``default.key.serde``."""
    from streams import JoinWindows, StreamJoined
    w = JoinWindows.ofTimeDifferenceWithNoGrace(100)
    b = StreamsBuilder()
    left, right = b.stream("l", Consumed.with_(S, S)), b.stream("r", Consumed.with_(S, S))
    assert left.join(right, lambda x, y: x, w).key_serde is None
    assert isinstance(left.leftJoin(right, lambda x, y: x, w, StreamJoined.with_(Serdes.Json(), S, S)).key_serde,
                      type(Serdes.Json()))
    b = StreamsBuilder()
    left, right = b.stream("l", Consumed.with_(S, S)), b.stream("r", Consumed.with_(S, S))
    left.outerJoin(right, lambda x, y: f"{x}+{y}", w).to("out", Produced.valueSerde(S))
    d = _driver(b, **{"default.key.serde": "Json"})
    d.createInputTopic("l", S, S).pipeInput("k", "L", 0)
    d.createInputTopic("r", S, S).pipeInput("k", "R", 1)
    assert d.createOutputTopic("out", Serdes.ByteArray(), S).readKeyValuesToList() == [(b'"k"', "L+R")]


def test_a_key_change_before_a_global_table_join_still_repartitions_the_grouping_after_it():
    """KStreamImplTest.shouldPropagateRepartitionFlagAfterGlobalKTableJoin (guard, already
    matched): the join keeps the stream's pending key change, so ``groupByKey().count()``
    repartitions."""
    import re
    b = StreamsBuilder()
    g = b.globalTable("globalTopic", Consumed.with_(S, S))
    (b.stream("topic", Consumed.with_(S, S)).selectKey(lambda k, v: v)
     .join(g, lambda k, v: k + v, lambda v1, v2: v1 + v2).groupByKey().count())
    assert re.search(r"Sink: .*-repartition\)?$", str(b.build().describe()), re.M)     # Kafka: "Sink: .*-repartition"


def test_peek_and_foreach_observe_every_record():
    """KStreamPeekTest.shouldObserveStreamElements (guard, already matched)."""
    b = StreamsBuilder()
    peeked, each = [], []
    b.stream("topic", Consumed.with_(I, S)).peek(lambda k, v: peeked.append((k, v))) \
        .foreach(lambda k, v: each.append((k, v)))
    source = _driver(b).createInputTopic("topic", I, S)
    for key in range(32):
        source.pipeInput(key, f"V{key}", 0)
    assert peeked == each == [(key, f"V{key}") for key in range(32)]


def test_join_parameters_take_serdes_by_class_name_as_consumed_does():
    """Kafka's ``Joined.with``/``keySerde``/``withValueSerde`` and ``StreamJoined.with``: their
    serdes serialize the repartition topic of a key-changed stream, so a class name (as
    ``Consumed.with_`` takes one) must become a serde."""
    from streams import StreamJoined
    b = StreamsBuilder()
    stream, table = b.stream("s", Consumed.with_("String", "String")), b.table("t", Consumed.with_(S, S))
    stream.selectKey(lambda k, v: v).join(table, lambda v1, v2: v1 + v2,
                                          Joined.keySerde("String").withValueSerde("StringSerde")) \
        .to("out", Produced.with_(S, S))
    d = _driver(b)
    d.createInputTopic("t", S, S).pipeInput("a", "A", 0)
    d.createInputTopic("s", S, S).pipeInput("1", "a", 1)
    assert d.createOutputTopic("out", S, S).readKeyValuesToList() == [("a", "aA")]
    joined = StreamJoined.with_("String", "org.apache.kafka.common.serialization.Serdes$StringSerde", "String")
    assert all(isinstance(s, type(S)) for s in (joined.key_serde, joined.value_serde, joined.other_value_serde))
    assert isinstance(Joined.with_("String", "String", "String").other_value_serde, type(S))


# ---------------------------------------------------------------------- table / globalTable serdes
def _join_a_table(make_table, is_global):
    """A stream joined with the table a ``make_table(builder)`` gives; the table topic holds a
    Long value, the defaults are String: the join shows what the table's source decoded."""
    b = StreamsBuilder()
    table = make_table(b)
    stream = b.stream("s", Consumed.with_(S, S))
    joined = (stream.join(table, lambda k, v: k, lambda v1, v2: f"{v1}:{v2!r}") if is_global
              else stream.join(table, lambda v1, v2: f"{v1}:{v2!r}"))
    joined.to("out", Produced.with_(S, S))
    d = _driver(b, **{"default.key.serde": "String", "default.value.serde": "String"})
    d.createInputTopic("t", S, Serdes.Long()).pipeInput("k", 7, 0)
    d.createInputTopic("s", S, S).pipeInput("k", "v", 1)
    return d.createOutputTopic("out", S, S).readKeyValuesToList()


@pytest.mark.parametrize("is_global", [False, True])
@pytest.mark.parametrize("positional", [False, True])
def test_a_table_of_materialized_alone_reads_its_topic_with_materializeds_serdes(is_global, positional):
    """StreamsBuilder.table(topic, Materialized)/globalTable(topic, Materialized): the source's
    Consumed is ``Consumed.with(materialized's key serde, value serde)``, so the topic is read
    with them, not with the defaults; the Materialized may come second, as Kafka's overload."""
    m = Materialized.as_("store").withKeySerde(S).withValueSerde(Serdes.Long())

    def make(b):
        method = b.globalTable if is_global else b.table
        return method("t", m) if positional else method("t", materialized=m)
    assert _join_a_table(make, is_global) == [("k", "v:7")]


@pytest.mark.parametrize("is_global", [False, True])
def test_a_table_with_consumed_keeps_consumeds_serdes_for_its_store(is_global):
    """StreamsBuilder.table/globalTable(topic, Consumed, Materialized): "always use the serdes from
    consumed" (``materialized.withKeySerde(consumed.keySerde()).withValueSerde(...)``): a value
    serde given to the Materialized is not the store's."""
    def make(b):
        method = b.globalTable if is_global else b.table
        return method("t", Consumed.with_(S, Serdes.Long()), Materialized.as_("store").withValueSerde(S))
    assert _join_a_table(make, is_global) == [("k", "v:7")]
    b = StreamsBuilder()
    (b.globalTable if is_global else b.table)("t", Consumed.with_(S, Serdes.Long()),
                                               Materialized.as_("store").withValueSerde(S))
    spec = next(s for n in b.build().nodes for s in n.stores if s.name == "store")
    assert isinstance(spec.value_serde, type(Serdes.Long()))
