"""The worker's pure parts: lag from Spark's offsets, the checkpoint's sinkId generations, a batch's
start (kept for batch 0 while the checkpoint lives), the DirectorySink's batch names, the plugin
aliases, the standalone session's Spark defaults, and offset changes (a sink's parsed as Kafka's
SinkUtils, FileStreamSource's checks and its offset key, the answer the connector's hook picks)."""
from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytestmark = pytest.mark.unit


def test_lag_sums_what_both_offsets_name():
    from connect.query_status import lag
    assert lag({"orders": {"0": 5, "1": 7}}, {"orders": {"0": 9, "1": 7}}) == 4
    assert lag('{"position": 10}', '{"position": 25}') == 15
    assert lag({"position": 10}, None) is None
    assert lag({"a": {"0": 3}}, {"b": {"0": 9}}) is None


@given(st.dictionaries(st.sampled_from("abc"), st.dictionaries(st.sampled_from("0123"), st.integers(0, 10**6)),
                       min_size=1))
def test_lag_is_zero_at_the_latest_offset_and_never_negative(offsets):
    from connect.query_status import lag
    assert lag(offsets, offsets) in (0, None)
    ahead = {t: {p: o + 1 for p, o in ps.items()} for t, ps in offsets.items()}
    assert (lag(ahead, offsets) or 0) == 0


def test_sink_id_is_kept_with_the_checkpoint_and_new_without_it(tmp_path):
    from connect.connector_state import ConnectorPaths
    paths = ConnectorPaths(str(tmp_path), "connect/group", "orders sink")
    assert paths.previous() is None and paths.fresh()
    first = paths.sink_id("orders sink", "b:9092")
    assert paths.previous() == (first, "b:9092")
    assert paths.sink_id("orders sink", "b:9092") != first  # still no checkpoint offsets: a new query
    second = paths.previous()[0]
    os.makedirs(os.path.join(paths.checkpoint, "offsets"))
    with open(os.path.join(paths.checkpoint, "offsets", "0"), "w") as f:
        f.write("v1\n{}\n{}\n")
    assert paths.sink_id("orders sink", "b:9092") == second
    assert "/" not in os.path.relpath(paths.root, tmp_path).split(os.sep)[0]
    paths.discard()
    assert not os.path.exists(paths.root)


def test_names_that_differ_only_in_special_characters_get_their_own_directory_and_sink_id(tmp_path):
    """Kafka keys a connector by its exact name: one directory (so one checkpoint) and one sinkId
    per name, mapped back to the name from the directory listing; the older naming's directory
    (the readable part alone) is listed without a name."""
    from connect.connector_state import ConnectorPaths
    names = ["x y", "x_y", "x/y", "x" * 300, "x" * 300 + "!"]
    paths = [ConnectorPaths(str(tmp_path), "g", n) for n in names]
    assert len({p.root for p in paths}) == len(names)
    assert all(len(os.path.basename(p.root)) < 100 for p in paths)
    ids = [p.sink_id(n, "b:9092") for p, n in zip(paths, names)]
    assert len(set(ids)) == len(names) and not any(a.startswith(b + "-") for a in ids for b in ids)
    os.makedirs(os.path.join(tmp_path, "g", "x_y"))            # a directory of the older naming
    listed = {p.root: p.name for p in ConnectorPaths.existing(str(tmp_path), "g")}
    assert listed == {**{p.root: n for p, n in zip(paths, names)}, os.path.join(tmp_path, "g", "x_y"): None}


def test_a_batch_starts_where_the_last_ended_and_batch_0_where_its_query_started(tmp_path):
    from connect.connector_state import ConnectorPaths, batch_start_offset
    paths = ConnectorPaths(str(tmp_path), "g", "sink")
    assert paths.query_start(lambda: {"orders": {"0": 5, "1": -2}}) == {"orders": {"0": 5, "1": -2}}
    os.makedirs(os.path.join(paths.checkpoint, "offsets"))
    with open(os.path.join(paths.checkpoint, "offsets", "0"), "w") as f:
        f.write('v1\n{}\n{"orders": {"0": 9, "1": 3}}\n')
    # Batch 0 replayed after the group moved on: the start kept with the checkpoint, not the group's.
    start = paths.query_start(lambda: {"orders": {"0": 9, "1": 3}})
    assert batch_start_offset(paths.checkpoint, 0, start) == {("orders", 0): 5, ("orders", 1): -2}
    assert batch_start_offset(paths.checkpoint, 1, start) == {("orders", 0): 9, ("orders", 1): 3}
    assert batch_start_offset(paths.checkpoint, 0, "earliest") == {}
    paths.discard()  # the checkpoint lost: the new query's start is the group's offsets
    assert paths.query_start(lambda: {"orders": {"0": 9}}) == {"orders": {"0": 9}}


def test_a_batch_holds_the_partitions_whose_range_is_not_empty_or_whose_start_is_unknown():
    from connect.connector_state import held_partitions
    end = {"b": {"0": 5}, "a": {"1": 7, "0": 3, "2": 0}}
    start = {("a", 0): 3, ("a", 1): 2, ("b", 0): -2}     # a/2 missing (new), b/0 earliest
    assert held_partitions(start, end) == (("a", 1), ("a", 2), ("b", 0))
    assert held_partitions({("a", 0): 3, ("a", 1): 7, ("a", 2): 0, ("b", 0): 5}, end) == ()
    assert held_partitions({}, {}) == ()


def test_directory_batch_names_sort_by_offset_and_hide_nothing():
    from connect.directory_sink import DirectorySink
    name = DirectorySink.batch_name("orders/eu", 3, 42)
    assert name == "orders_eu+3+00000000000000000042"
    assert not name.startswith(("_", "."))
    assert DirectorySink.batch_name("t", 0, 9) < DirectorySink.batch_name("t", 0, 10)


def test_plugins_known_by_class_and_short_name():
    from connect import plugins
    from connect.config import CONNECTORS, CONVERTERS, TRANSFORMATIONS
    from connect.connector import connector_class
    assert connector_class("FileStreamSource") is connector_class("org.apache.kafka.connect.file.FileStreamSourceConnector")
    assert connector_class("DirectorySink").kind == "sink" and connector_class("TopicCopy").kind == "source"
    assert plugins.canonical(CONVERTERS, "StringConverter") == "org.apache.kafka.connect.storage.StringConverter"
    assert "org.apache.kafka.connect.transforms.MaskField$Value" in TRANSFORMATIONS
    props = plugins.canonical_transform_config({"transforms.a.type": "RegexRouter", "predicates.p.type": "HasHeaderKey"})
    assert props["transforms.a.type"] == "org.apache.kafka.connect.transforms.RegexRouter"
    assert props["predicates.p.type"] == "org.apache.kafka.connect.transforms.predicates.HasHeaderKey"
    assert "FileStreamSink" in CONNECTORS


def test_the_standalone_session_turns_dataframe_debugging_off_unless_a_conf_sets_it():
    from connect.cli import session_conf
    key = "spark.python.sql.dataFrameDebugging.enabled"
    assert session_conf({"spark.ui.enabled": "false"}) == {key: "false", "spark.ui.enabled": "false",
                                                           "spark.sql.caseSensitive": "true",
                                                           "spark.sql.session.timeZone": "UTC"}
    assert session_conf({key: "true", "spark.sql.session.timeZone": "Europe/Paris"})[key] == "true"
    assert session_conf({"spark.sql.session.timeZone": "Europe/Paris"})["spark.sql.session.timeZone"] == "Europe/Paris"


# ---------------------------------------------------------------------------------- offset changes
@pytest.mark.parametrize("partition, offset, message", [
    ({"kafka_topic": "t", "kafka_partition": 0.9}, {"kafka_offset": 1},
     "Failed to parse the following Kafka partition value in the provided offsets: '0.9'. "
     "Partition values for sink connectors need to be integers."),
    ({"kafka_topic": "t", "kafka_partition": True}, {"kafka_offset": 1},
     "Failed to parse the following Kafka partition value in the provided offsets: 'true'. "
     "Partition values for sink connectors need to be integers."),
    ({"kafka_topic": "t", "kafka_partition": 2 ** 31}, None,
     "Failed to parse the following Kafka partition value in the provided offsets: '2147483648'. "
     "Partition values for sink connectors need to be integers."),
    ({"kafka_topic": "t", "kafka_partition": 0}, {"kafka_offset": 2.7},
     "Failed to parse the following Kafka offset value in the provided offsets: '2.7'. "
     "Offset values for sink connectors need to be integers."),
    ({"kafka_topic": "t", "kafka_partition": 0}, {"kafka_offset": 2.0},
     "Failed to parse the following Kafka offset value in the provided offsets: '2.0'. "
     "Offset values for sink connectors need to be integers."),
    ({"kafka_topic": "t", "kafka_partition": 0}, {"kafka_offset": " 3"},
     "Failed to parse the following Kafka offset value in the provided offsets: ' 3'. "
     "Offset values for sink connectors need to be integers."),
    ({"kafka_topic": "t"}, {"kafka_offset": 1},
     "The partition for a sink connector offset must contain the keys 'kafka_topic' and 'kafka_partition'"),
    ({"kafka_topic": None, "kafka_partition": 0}, None, "Kafka topic names must be valid strings and may not be null"),
    ({"kafka_topic": "t", "kafka_partition": None}, None, "Kafka partitions must be valid numbers and may not be null"),
    ({"kafka_topic": "t", "kafka_partition": 0}, {"offset": 1},
     "The offset for a sink connector should either be null or contain the key 'kafka_offset'"),
])
def test_sink_offsets_are_refused_with_kafkas_sinkutils_messages(partition, offset, message):
    from connect.errors import BadRequestError
    from connect.offsets_admin import parse_sink_offsets
    with pytest.raises(BadRequestError) as refused:
        parse_sink_offsets([(partition, offset)])
    assert str(refused.value) == message


def test_sink_offsets_are_read_through_their_text_as_kafka_reads_them():
    from connect.offsets_admin import parse_sink_offsets
    assert parse_sink_offsets([({"kafka_topic": "t", "kafka_partition": "3"}, {"kafka_offset": "+7"}),
                               ({"kafka_topic": 5, "kafka_partition": 0}, {"kafka_offset": 2 ** 63 - 1}),
                               ({"kafka_topic": "t", "kafka_partition": 1}, None)]) == \
        {("t", 3): 7, ("5", 0): 2 ** 63 - 1, ("t", 1): None}


def test_java_string_quotes_values_as_kafka_messages_do():
    from connect.offsets_admin import java_string
    assert [java_string(v) for v in (0.9, 100.0, 1e7, 1.5e-5, 1e20, True, None, {"a": [1, 2.5]})] == \
        ["0.9", "100.0", "1.0E7", "1.5E-5", "1.0E20", "true", "null", "{a=[1, 2.5]}"]


@pytest.mark.parametrize("partition, offset, message", [
    ({"filename": "f"}, {"position": "abc"}, "The value for the 'position' key in the offset is expected to be a Long value"),
    ({"filename": "f"}, {"position": 2.0}, "The value for the 'position' key in the offset is expected to be a Long value"),
    ({"filename": "f"}, {"position": True}, "The value for the 'position' key in the offset is expected to be a Long value"),
    ({"filename": "f"}, {"pos": 2}, "Offset objects should either be null or contain the key 'position'"),
    ({"filename": "f"}, {"position": -4}, "The value for the 'position' key in the offset should be a non-negative value"),
    ({"file": "f"}, {"position": 2}, "Partition objects should contain the key 'filename'"),
])
def test_file_source_refuses_offsets_with_kafkas_checks(partition, offset, message):
    from connect.errors import ConnectError
    from connect.file_stream import FileStreamSource
    with pytest.raises(ConnectError) as refused:
        FileStreamSource.alter_offsets({"file": "f"}, [(partition, offset)])
    assert str(refused.value) == message


def test_offset_hooks_choose_kafkas_answer():
    from connect.connector import SinkConnector, SourceConnector
    from connect.file_stream import FileStreamSink, FileStreamSource
    from connect.offsets_admin import modified_message
    assert FileStreamSource.alter_offsets({"file": "f"}, [({"garbage": 1}, None), ({"filename": "f"}, {"position": 0})])
    assert FileStreamSink.alter_offsets({}, {("t", 0): 5})
    assert not SourceConnector.alter_offsets({}, []) and not SinkConnector.alter_offsets({}, {})
    assert modified_message(True, False) == "The offsets for this connector have been altered successfully"
    assert modified_message(False, True) == (
        "The Connect framework-managed offsets for this connector have been reset successfully. However, if this "
        "connector manages offsets externally, they will need to be manually reset in the system that the "
        "connector uses.")


def test_file_source_keys_offsets_by_the_file_setting_and_reads_older_absolute_ones():
    from connect.config import parse_connector_config
    from connect.connector import ConnectorContext
    from connect.file_stream import FileStreamSource

    def source(file: str, stored: list) -> FileStreamSource:
        config = parse_connector_config({"name": "s", "connector.class": "FileStreamSource", "file": file,
                                         "topic": "t"})
        return FileStreamSource(config, ConnectorContext(None, "b:9092", stored))

    written = "./data/../in.txt"
    absolute = os.path.abspath(written)
    assert source(written, []).source_offsets({"position": 6}) == [({"filename": written}, {"position": 6})]
    assert source(written, []).file == absolute
    assert source(written, [({"filename": written}, {"position": 4})]).stored_position() == 4
    # one an earlier Riverlog stored under the absolute path, read when the setting has none
    assert source(written, [({"filename": absolute}, {"position": 9})]).stored_position() == 9
    assert source(written, [({"filename": absolute}, {"position": 9}),
                            ({"filename": written}, {"position": 4})]).stored_position() == 4
    assert source(written, [({"filename": "other"}, {"position": 9})]).stored_position() == 0


def test_a_sink_offset_the_group_kept_fails_the_alter_and_names_the_partition():
    """OffsetDelete answers per partition: one it refused (a member still consumes the topic) must
    fail the offsets request rather than report success."""
    from broker.client import ConsumerGroupTopicPartitions
    from broker.client.message import _rebuild_topic_partition
    from broker.errors import KafkaError, GroupSubscribedToTopicError
    from connect.errors import BadRequestError
    from connect.offsets_admin import _check_deleted
    ok = _rebuild_topic_partition("t", 0, -1001, None, None, None)
    kept = _rebuild_topic_partition("t", 1, -1001, None, None,
                                    KafkaError.of(GroupSubscribedToTopicError("subscribed")))
    _check_deleted("g", ConsumerGroupTopicPartitions("g", [ok]))
    with pytest.raises(BadRequestError, match="t-1"):
        _check_deleted("g", ConsumerGroupTopicPartitions("g", [ok, kept]))


def test_topic_tracking_reads_a_sink_batchs_topics_from_its_offsets_and_a_sources_from_its_metric():
    """A sink connector is not observed: the topics whose offsets its batch moved are the ones it
    read; a source connector's observed metric (the topics written) wins over its input offsets."""
    from types import SimpleNamespace as NS

    from connect.topic_tracking import TOPICS_METRIC, progress_topics
    sink = NS(observedMetrics={}, numInputRows=3, sources=[NS(
        startOffset='{"a": {"0": 5, "1": 2}, "b": {"0": 7}}', endOffset='{"a": {"0": 5, "1": 4}, "b": {"0": 7}, "c": {"0": 1}}')])
    assert progress_topics(sink) == {"a", "c"}
    assert progress_topics(NS(observedMetrics={}, numInputRows=0, sources=sink.sources)) == set()
    source = NS(observedMetrics={TOPICS_METRIC: NS(topics=["out"])}, numInputRows=3, sources=sink.sources)
    assert progress_topics(source) == {"out"}
    assert progress_topics(NS(observedMetrics={}, numInputRows=2, sources=[NS(startOffset=None,
                                                                              endOffset='{"filename": "x"}')])) == set()
