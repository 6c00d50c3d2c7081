"""The options of ``riverlog produce`` and ``consume`` turned into what they run with, checked as
Kafka's ``ConsoleProducerOptions`` and ``ConsoleConsumerOptions`` check them: the producer and
consumer configs, the line reader and record formatter of ``--property`` values, the topic (TOPIC,
``--topic`` or ``--include``), ``--offset``. Pure: no client is made here.
"""
from __future__ import annotations

import re

import click

from broker.cli.line_reader import LineReader, LineReaderError
from broker.cli.message_formatter import MessageFormatter, MessageFormatterError
from broker.cli.params import INT64_MAX
from broker.cli.properties_file import property_args, read_properties


def console_subscription(argument: str | None, option: str | None, include: str | None,
                         partition: int | None) -> list[str]:
    """What the console consumer subscribes to: its topic (TOPIC or ``--topic``), or the
    ``--include`` regex as an anchored pattern; checked as ``ConsoleConsumerOptions.checkRequiredArgs``."""
    if include is None:
        return [one_topic(argument, option)]
    if argument is not None or option is not None:
        raise click.UsageError("Exactly one of --include/--topic is required.")
    if partition is not None:
        raise click.UsageError("The topic is required when partition is specified.")
    try:
        re.compile(include)
    except re.error as e:
        raise click.BadParameter(f"{include!r} is not a regular expression: {e}", param_hint="'--include'") from None
    return [f"^(?:{include})$"]


def one_topic(argument: str | None, option: str | None) -> str:
    """The topic, given as TOPIC or as Kafka's ``--topic`` (once)."""
    if argument is not None and option is not None and argument != option:
        raise click.UsageError(f"two topics given: {argument!r} and --topic {option!r}; give one")
    if argument is None and option is None:
        raise click.UsageError("Missing the topic: give it as TOPIC or --topic")
    return argument if argument is not None else option


def producer_config(bootstrap: str, properties: dict, compression: str | None, acks: str | None) -> dict:
    """The producer config as ``ConsoleProducerOptions.producerProps``: the ``--config`` values,
    then ``--bootstrap-server``; ``acks`` and ``compression.type`` from ``--acks`` / ``--compression``
    when given, else from the properties, else all / none (``maybeMergeOptions``; Kafka's own tool
    puts its codec option over a ``compression.type`` property even when not given)."""
    config = dict(properties)
    config["bootstrap.servers"] = bootstrap
    for key, value, default in (("acks", acks, "all"), ("compression.type", compression, "none")):
        if value is not None or key not in config:
            config[key] = value or default
    return config


def line_reader_of(reader_config, properties, key_separator, ignore_error) -> LineReader:
    """The line reader of ``--reader-config``, then ``--property`` values, then ``--key-separator``
    and ``--ignore-error`` (a named option wins)."""
    props = read_properties(reader_config) if reader_config else {}
    props.update(property_args(properties))
    if key_separator:
        props.update({"parse.key": "true", "key.separator": key_separator})
    if ignore_error:
        props["ignore.error"] = "true"
    try:
        return LineReader.from_properties(props)
    except LineReaderError as e:
        raise click.BadParameter(str(e), param_hint="'--property'") from None


class _ConsoleOffset(click.ParamType):
    """Kafka's console consumer ``--offset``: ``earliest``, ``latest`` or an offset >= 0."""

    name = "offset"

    def convert(self, value, param, ctx):
        from broker.client import OFFSET_BEGINNING, OFFSET_END
        text = str(value).strip().lower()
        if text in ("earliest", "latest"):
            return OFFSET_BEGINNING if text == "earliest" else OFFSET_END
        if not text.isdigit() or int(text) > INT64_MAX:
            self.fail(f"{value!r} is not an offset: use earliest, latest or a number from 0 to {INT64_MAX}",
                      param, ctx)
        return int(text)


CONSOLE_OFFSET = _ConsoleOffset()


def message_formatter(formatter_config, properties, flags: dict, separator) -> MessageFormatter:
    """The formatter of ``--formatter-config``, then ``--property`` values, then the ``--print-*``
    flags given and ``--separator`` (as ``ConsoleConsumerOptions.formatterArgs``: later wins)."""
    props = read_properties(formatter_config) if formatter_config else {}
    props.update(property_args(properties))
    props.update({name: "true" for name, on in flags.items() if on})
    if separator is not None:
        props["key.separator"] = separator
    try:
        return MessageFormatter.from_properties(props)
    except MessageFormatterError as e:
        raise click.BadParameter(str(e), param_hint="'--property'") from None


def check_console_consumer_options(partition, offset, from_beginning, group, properties: dict,
                                   file_properties: dict | None = None) -> None:
    """``ConsoleConsumerOptions.checkRequiredArgs`` and ``checkConsumerGroup``: --offset needs
    --partition and excludes --from-beginning; the group of --group and of ``group.id`` must agree,
    and a group does not go with --partition (a group member is given its partitions)."""
    if offset is not None and partition is None:
        raise click.UsageError("The partition is required when offset is specified.")
    if offset is not None and from_beginning:
        raise click.UsageError("Options from-beginning and offset cannot be specified together.")
    given = (group, (file_properties or {}).get("group.id"), properties.get("group.id"))
    groups = list(dict.fromkeys(g for g in given if g is not None))
    if len(groups) > 1:
        raise click.UsageError("The group ids provided in different places (directly using '--group', via "
                               "'--consumer-property', or via '--consumer.config') do not match. Detected group ids: "
                               + ", ".join(f"'{g}'" for g in groups))
    if groups and partition is not None:
        raise click.UsageError("Options group and partition cannot be specified together.")


def console_consumer_config(bootstrap: str, properties: dict, isolation_level: str | None,
                             from_beginning: bool) -> dict:
    """The consumer config as Kafka's ``ConsoleConsumerOptions.buildConsumerProps``: the
    ``--consumer-property`` values, then ``--bootstrap-server``; ``isolation.level`` from
    ``--isolation-level`` when given, else from the properties, else read_uncommitted
    (``maybeMergeOptions``); ``auto.offset.reset`` from ``--from-beginning`` unless the properties
    set it, which must then agree (``setAutoOffsetResetValue``): an offset out of range moves to the
    end unless --from-beginning."""
    config = dict(properties)
    config["bootstrap.servers"] = bootstrap
    if isolation_level is not None or "isolation.level" not in config:
        config["isolation.level"] = isolation_level or "read_uncommitted"
    reset = config.get("auto.offset.reset")
    if reset is None:
        config["auto.offset.reset"] = "earliest" if from_beginning else "latest"
    elif from_beginning and reset != "earliest":
        raise click.UsageError(f"Can't simultaneously specify --from-beginning and 'auto.offset.reset={reset}', "
                               "please remove one option")
    return config
