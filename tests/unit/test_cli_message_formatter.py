"""``riverlog consume``'s record formatter against Kafka's DefaultMessageFormatterTest, and its
option checks against ConsoleConsumerOptionsTest (the ``--property`` names and error messages)."""
from __future__ import annotations

import click
import pytest

from broker.cli.console_options import (check_console_consumer_options, console_subscription, message_formatter,
                                        one_topic, producer_config)
from broker.cli.message_formatter import MessageFormatter, MessageFormatterError
from broker.client import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Message

pytestmark = pytest.mark.unit

NO_FLAGS = {"print.key": False}


def fmt(msg, **props) -> bytes:
    return MessageFormatter.from_properties(props).format(msg)


def test_default_message_formatter_fields_in_kafkas_order():
    plain = Message("topic", 0, 123, b"key", b"value")
    configs = {}
    assert fmt(plain) == b"value\n"
    steps = [("print.key", b"key\tvalue\n"), ("print.partition", b"Partition:0\tkey\tvalue\n"),
             ("print.timestamp", b"NO_TIMESTAMP\tPartition:0\tkey\tvalue\n"),
             ("print.offset", b"NO_TIMESTAMP\tPartition:0\tOffset:123\tkey\tvalue\n"),
             ("print.headers", b"NO_TIMESTAMP\tPartition:0\tOffset:123\tNO_HEADERS\tkey\tvalue\n"),
             ("print.delivery", b"NO_TIMESTAMP\tPartition:0\tOffset:123\tDelivery:NOT_PRESENT\tNO_HEADERS\tkey\tvalue\n"),
             ("print.epoch", b"NO_TIMESTAMP\tPartition:0\tOffset:123\tDelivery:NOT_PRESENT\tEpoch:NOT_PRESENT\t"
                             b"NO_HEADERS\tkey\tvalue\n")]
    for name, expected in steps:
        configs[name] = "true"
        assert fmt(plain, **configs) == expected, name
    full = Message("topic", 0, 123, b"key", b"value", [("h1", b"v1"), ("h2", b"v2")],
                   timestamp=(TIMESTAMP_CREATE_TIME, 123), leader_epoch=58)
    assert fmt(full, **configs) == b"CreateTime:123\tPartition:0\tOffset:123\tDelivery:NOT_PRESENT\tEpoch:58\th1:v1,h2:v2\tkey\tvalue\n"
    configs.update({"print.value": "false", "print.delivery": "false", "key.separator": "<sep>"})
    assert fmt(full, **configs) == b"CreateTime:123<sep>Partition:0<sep>Offset:123<sep>Epoch:58<sep>h1:v1,h2:v2<sep>key\n"
    configs.update({"print.epoch": "false", "line.separator": "<end>", "headers.separator": "|"})
    assert fmt(full, **configs) == b"CreateTime:123<sep>Partition:0<sep>Offset:123<sep>h1:v1|h2:v2<sep>key<end>"
    null_value = Message("topic", 0, 123, b"key", None, [("h1", None)], timestamp=(TIMESTAMP_LOG_APPEND_TIME, 9))
    configs.update({"print.value": "true", "null.literal": "<null>"})
    assert fmt(null_value, **configs) == b"LogAppendTime:9<sep>Partition:0<sep>Offset:123<sep>h1:<null><sep>key<sep><null><end>"


def test_print_offset_alone_does_not_print_the_partition():
    msg = Message("t", 3, 7, b"k", b"v")
    assert fmt(msg, **{"print.offset": "true"}) == b"Offset:7\tv\n"
    assert fmt(msg, **{"print.offset": "true", "print.partition": "true"}) == b"Partition:3\tOffset:7\tv\n"


def test_every_field_off_prints_nothing_and_bytes_are_kept():
    msg = Message("t", 0, 0, b"\xff\xfe", b"\x00\xc3(")
    assert fmt(msg, **{"print.value": "false"}) == b""
    assert fmt(msg, **{"print.key": "true"}) == b"\xff\xfe\t\x00\xc3(\n"
    assert fmt(Message("t", 0, 0, None, None), **{"print.key": "yes"}) == b"null\n"


def test_unknown_property_and_java_deserializers_are_refused():
    with pytest.raises(MessageFormatterError, match="print.keys.*print.timestamp, print.key"):
        MessageFormatter.from_properties({"print.keys": "true"})
    with pytest.raises(MessageFormatterError, match="deserializer classes are Java classes"):
        MessageFormatter.from_properties({"key.deserializer": "org.apache.kafka.common.serialization.StringDeserializer"})


def test_flags_then_properties_then_file(tmp_path):
    path = tmp_path / "formatter.properties"
    path.write_text("print.key=true\nkey.separator=\\t|\\t\nprint.value=true\n")
    formatter = message_formatter(str(path), ["print.value=false", "null.literal="], {"print.offset": True,
                                                                                       "print.key": False}, None)
    assert (formatter.print_key, formatter.print_value, formatter.print_offset) == (True, False, True)
    assert (formatter.key_separator, formatter.null_literal) == (b"\t|\t", b"")
    assert message_formatter(None, ["key.separator=,"], NO_FLAGS, ";").key_separator == b";"
    with pytest.raises(click.BadParameter, match="unknown formatter property"):
        message_formatter(None, ["print.partitions=true"], NO_FLAGS, None)


@pytest.mark.parametrize("args, message", [
    (dict(partition=None, offset=3, from_beginning=False, group=None, properties={}),
     "The partition is required when offset is specified."),
    (dict(partition=0, offset=3, from_beginning=True, group=None, properties={}),
     "Options from-beginning and offset cannot be specified together."),
    (dict(partition=0, offset=None, from_beginning=False, group="g", properties={}),
     "Options group and partition cannot be specified together."),
    (dict(partition=0, offset=None, from_beginning=False, group=None, properties={"group.id": "g"}),
     "Options group and partition cannot be specified together."),
    (dict(partition=None, offset=None, from_beginning=False, group="group-from-arguments",
          properties={"group.id": "group-from-properties"}),
     "Detected group ids: 'group-from-arguments', 'group-from-properties'"),
])
def test_console_consumer_option_errors(args, message):
    with pytest.raises(click.UsageError) as e:
        check_console_consumer_options(**args)
    assert message in e.value.message


def test_same_group_twice_is_one_group():
    check_console_consumer_options(None, None, True, "test-group", {"group.id": "test-group"})
    with pytest.raises(click.UsageError):
        check_console_consumer_options(None, None, True, "test-group", {"group.id": "other"})


def test_acks_and_compression_options_given_win_over_producer_properties():
    assert producer_config("h:1", {"acks": "1"}, None, None)["acks"] == "1"
    assert producer_config("h:1", {"acks": "1"}, None, "0")["acks"] == "0"
    assert producer_config("h:1", {"compression.type": "zstd"}, None, None)["compression.type"] == "zstd"
    assert producer_config("h:1", {"compression.type": "zstd"}, "lz4", None)["compression.type"] == "lz4"
    assert producer_config("h:1", {}, None, None) == {"bootstrap.servers": "h:1", "compression.type": "none",
                                                      "acks": "all"}


def test_topic_as_argument_or_kafkas_topic_option():
    assert one_topic("orders", None) == one_topic(None, "orders") == one_topic("orders", "orders") == "orders"
    with pytest.raises(click.UsageError, match="two topics given"):
        one_topic("a", "b")
    with pytest.raises(click.UsageError, match="TOPIC or --topic"):
        one_topic(None, None)


def test_include_is_an_anchored_pattern_instead_of_a_topic():
    assert console_subscription("orders", None, None, 0) == ["orders"]
    assert console_subscription(None, None, "orders-.*|audit", None) == ["^(?:orders-.*|audit)$"]
    with pytest.raises(click.UsageError, match="Exactly one of --include/--topic is required."):
        console_subscription(None, "orders", "o.*", None)
    with pytest.raises(click.UsageError, match="The topic is required when partition is specified."):
        console_subscription(None, None, "o.*", 0)
    with pytest.raises(click.BadParameter, match="not a regular expression"):
        console_subscription(None, None, "(", None)


def test_group_of_the_consumer_config_file_must_agree():
    check_console_consumer_options(None, None, False, "g", {}, {"group.id": "g"})
    with pytest.raises(click.UsageError, match="Detected group ids: 'group-from-arguments', 'group-from-file'"):
        check_console_consumer_options(None, None, False, "group-from-arguments", {}, {"group.id": "group-from-file"})
    with pytest.raises(click.UsageError, match="Options group and partition cannot be specified together."):
        check_console_consumer_options(0, None, False, None, {}, {"group.id": "g"})
