"""Records from the command line: ``produce``, ``consume`` and ``delete-records``.

    riverlog produce orders --file events.txt --key-separator :
    riverlog consume orders --from-beginning --max-messages 10 --print-key
    riverlog delete-records orders --partition 0 --offset 1000

These are top-level commands (as Kafka's console producer and consumer are tools of their own);
``broker.cli`` adds them to the ``riverlog`` group.
"""
from __future__ import annotations

import os
import random
import re
import sys

import click

from broker.cli.common import open_admin, pairs, partitions_of
from broker.cli.console_options import (CONSOLE_OFFSET, check_console_consumer_options, console_consumer_config,
                                        console_subscription, line_reader_of, message_formatter, one_topic,
                                        producer_config)
from broker.cli.line_reader import LineReaderError
from broker.cli.properties_file import read_properties
from broker.cli.params import COUNT, OFFSET_OR_HIGH_WATERMARK, PARTITION
from broker.errors import RiverlogError


@click.command()
@click.argument("topic", required=False)
@click.option("--topic", "topic_option", default=None, help="the topic, as Kafka's --topic (instead of TOPIC)")
@click.option("--file", "-f", "path", type=click.Path(exists=True, dir_okay=False),
              help="read lines from this file (default: standard input)")
@click.option("--key-separator", "-k", default=None,
              help="split each line into key and value at this (as --property parse.key=true key.separator=...)")
@click.option("--ignore-error", is_flag=True,
              help="a line without a separator is sent with a null key / no headers instead of stopping the "
                   "producer (as --property ignore.error=true)")
@click.option("--property", "properties", multiple=True, metavar="NAME=VALUE",
              help="line reader property of Kafka's console producer (repeatable): parse.key, key.separator, "
                   "parse.headers, headers.delimiter, headers.separator, headers.key.separator, ignore.error, "
                   "null.marker")
@click.option("--reader-config", type=click.Path(exists=True, dir_okay=False), default=None,
              help="a .properties file of line reader properties (--property wins over it)")
@click.option("--partition", type=PARTITION, default=None, help="default: chosen by the partitioner")
@click.option("--header", "-H", "headers", multiple=True, help="key=value header on every record")
@click.option("--acks", "--request-required-acks", default="all", show_default=True,
              type=click.Choice(["0", "1", "all", "-1"]))
@click.option("--compression", "--compression-codec", default="none", show_default=True,
              type=click.Choice(["none", "lz4", "zstd"]))
@click.option("--config", "-c", "--producer-property", "configs", multiple=True,
              help="key=value producer config (repeatable)")
@click.option("--producer.config", "--producer-config", "producer_file", type=click.Path(exists=True, dir_okay=False),
              default=None, help="a .properties file of producer configs (--config wins over it)")
@click.pass_context
def produce(ctx, topic, topic_option, path, key_separator, ignore_error, properties, reader_config, partition,
            headers, acks, compression, configs, producer_file):
    """Send each input line as one record (a console producer)."""
    from tqdm import tqdm

    from broker.client import Producer
    topic = one_topic(topic, topic_option)
    reader = line_reader_of(reader_config, properties, key_separator, ignore_error)
    config = producer_config(ctx.obj["bootstrap"], {**(read_properties(producer_file) if producer_file else {}),
                                                    **pairs(configs, "--config")},
                             compression if _given(ctx, "compression") else None, acks if _given(ctx, "acks") else None)
    header_list = _headers(headers)
    failures = []

    def on_delivery(err, msg):
        if err is not None:
            failures.append(err)

    producer = Producer(config)
    stream = open(path, "rb") if path else sys.stdin.buffer
    progress = tqdm(total=os.path.getsize(path), unit="B", unit_scale=True, desc=topic) if path else None
    count = 0
    bad_line = None
    try:
        for number, line in enumerate(_read_lines(stream, progress), 1):
            try:
                parsed, key, value = reader.parse(line, number)
            except LineReaderError as e:
                bad_line = str(e)
                break
            _produce_retrying(producer, topic, value, key, -1 if partition is None else partition,
                              (header_list + parsed) or None, on_delivery)
            count += 1
        left = producer.flush(60)
    finally:
        if progress is not None:
            progress.close()
        if path:
            stream.close()
        producer.close(5)
    if failures or left:
        raise failures[0].exception() if failures else RiverlogError(f"{left} record(s) were not acknowledged in time")
    click.echo(f"Produced {count} record(s) to {topic}.", err=True)
    if bad_line is not None:
        raise click.ClickException(f"{bad_line}; the lines before it were sent. Add --ignore-error "
                                   "(ignore.error=true) to send such lines with a null key or no headers")


def _given(ctx, name: str) -> bool:
    """Whether option ``name`` was on the command line (not its default)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name not in ("DEFAULT", "DEFAULT_MAP")


_LINE_END = re.compile(rb"\r\n|\r|\n")


def _read_lines(stream, progress=None):
    """The lines of ``stream`` without their ends, split as Java's ``BufferedReader.readLine``
    (Kafka's console producer): at ``\n``, ``\r`` or ``\r\n``; a last line without an end is a line.
    Reads what is available (``read1``), so typed lines are sent as they are entered."""
    read = getattr(stream, "read1", None) or stream.read
    carry, skip_lf = b"", False
    while True:
        data = read(1 << 16)
        if not data:
            break
        if progress is not None:
            progress.update(len(data))
        if skip_lf and data.startswith(b"\n"):      # the \n of a \r\n split across two reads
            data = data[1:]
        skip_lf = False
        buf, start = carry + data, 0
        for end in _LINE_END.finditer(buf):
            yield buf[start:end.start()]
            start = end.end()
            skip_lf = end.group() == b"\r" and start == len(buf)
        carry = buf[start:]
    if carry:
        yield carry


def _headers(values) -> list[tuple[str, bytes]]:
    """``--header k=v`` (repeatable) as record headers, every pair in the order given: Kafka's
    record headers are a list, and a key may repeat (``Headers.add``), so none is dropped."""
    out = []
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"--header must look like key=value, got {item!r}", param_hint="--header")
        out.append((key.strip(), value.strip().encode()))
    return out


def _produce_retrying(producer, topic, value, key, partition, headers, on_delivery):
    while True:
        try:
            producer.produce(topic, value=value, key=key, partition=partition, headers=headers,
                             on_delivery=on_delivery)
            return
        except BufferError:
            producer.poll(0.1)


# ----------------------------------------------------------------------------------- consume
@click.command()
@click.argument("topic", required=False)
@click.option("--topic", "topic_option", default=None, help="the topic, as Kafka's --topic (instead of TOPIC)")
@click.option("--include", default=None,
              help="instead of a topic: a regex of the topics to consume (the whole name must match; new "
                   "matching topics are picked up), as a group member (--group, else a group of its own)")
@click.option("--from-beginning", is_flag=True, help="start at the earliest offset (default: the end)")
@click.option("--partition", "-p", type=PARTITION, default=None, help="only this partition")
@click.option("--offset", "-o", type=CONSOLE_OFFSET, default=None,
              help="earliest, latest or an offset >= 0 to start at (needs --partition); past the end: the end")
@click.option("--group", "-g", default=None,
              help="consume as a member of this consumer group: start at its committed offsets, commit "
                   "what was printed (default: no group, every partition, nothing committed)")
@click.option("--max-messages", "-n", type=COUNT, default=None, help="stop after this many records")
@click.option("--timeout-ms", type=COUNT, default=None, help="stop when nothing arrives for this long")
@click.option("--print-key", is_flag=True)
@click.option("--print-headers", is_flag=True)
@click.option("--print-timestamp", is_flag=True)
@click.option("--print-partition", is_flag=True)
@click.option("--print-offset", is_flag=True)
@click.option("--separator", default=None, help="between printed fields (default: a tab; as key.separator)")
@click.option("--property", "properties", multiple=True, metavar="NAME=VALUE",
              help="formatter property of Kafka's console consumer (repeatable): print.timestamp, print.key, "
                   "print.value, print.partition, print.offset, print.epoch, print.headers, key.separator, "
                   "line.separator, headers.separator, null.literal")
@click.option("--formatter-config", type=click.Path(exists=True, dir_okay=False), default=None,
              help="a .properties file of formatter properties (--property wins over it)")
@click.option("--skip-message-on-error", is_flag=True,
              help="report a record that cannot be read on stderr and go on, instead of stopping")
@click.option("--isolation-level", type=click.Choice(["read_uncommitted", "read_committed"]), default=None,
              help="read_committed hides records of open and aborted transactions (default: read_uncommitted, "
                   "as Kafka's console consumer)")
@click.option("--consumer.config", "--consumer-config", "consumer_file", type=click.Path(exists=True, dir_okay=False),
              default=None, help="a .properties file of consumer configs (--consumer-property wins over it)")
@click.option("--consumer-property", "consumer_properties", multiple=True,
              help="key=value consumer config (repeatable), e.g. isolation.level=read_committed")
@click.pass_context
def consume(ctx, topic, topic_option, include, from_beginning, partition, offset, group, max_messages, timeout_ms,
            print_key, print_headers, print_timestamp, print_partition, print_offset, separator, properties,
            formatter_config, skip_message_on_error, isolation_level, consumer_file, consumer_properties):
    """Print records of a topic, one per line (a console consumer)."""
    from broker.client import OFFSET_BEGINNING, OFFSET_END, Consumer, TopicPartition
    subscription = console_subscription(topic, topic_option, include, partition)
    topic = subscription[0] if include is None else None
    flags = {"print.key": print_key, "print.headers": print_headers, "print.timestamp": print_timestamp,
             "print.partition": print_partition, "print.offset": print_offset}
    formatter = message_formatter(formatter_config, properties, flags, separator)
    from_file = read_properties(consumer_file) if consumer_file else {}
    extra = pairs(consumer_properties, "--consumer-property")
    check_console_consumer_options(partition, offset, from_beginning, group, extra, from_file)
    config = console_consumer_config(ctx.obj["bootstrap"], {**from_file, **extra}, isolation_level, from_beginning)
    if group is not None:
        config["group.id"] = group
    if include is not None and "group.id" not in config:       # as Kafka's: a group of its own, nothing committed
        config["group.id"] = f"console-consumer-{random.randrange(100000)}"
        config.setdefault("enable.auto.commit", "false")
    if "group.id" in config:
        consumer = Consumer(config)
        consumer.subscribe(subscription)
    else:
        with open_admin(ctx) as admin:
            every = partitions_of(admin, topic)
        start = offset if offset is not None else (OFFSET_BEGINNING if from_beginning else OFFSET_END)
        consumer = Consumer(config)
        consumer.assign([TopicPartition(topic, p, start) for p in (every if partition is None else [partition])])
    seen = 0
    try:
        while max_messages is None or seen < max_messages:
            msg = consumer.poll(None if timeout_ms is None else timeout_ms / 1000.0)
            if msg is None:
                break
            if msg.error():
                if not skip_message_on_error:
                    raise msg.error().exception()
                click.echo(f"Error processing message, skipping this message: {msg.error().str()}", err=True)
                continue
            seen += 1
            out = formatter.format(msg)
            if out:
                try:
                    click.echo(out, nl=False)
                except BrokenPipeError:          # ConsoleConsumer.checkErr: nobody reads the output any more
                    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                    click.echo("Unable to write to standard out, closing consumer.", err=True)
                    break
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()
    click.echo(f"Processed a total of {seen} messages", err=True)


# ----------------------------------------------------------------------------------- delete-records
@click.command("delete-records")
@click.argument("topic")
@click.option("--offset", "-o", type=OFFSET_OR_HIGH_WATERMARK, required=True,
              help="delete every record below this offset; -1: everything up to the high watermark")
@click.option("--partition", "-p", "partitions", type=PARTITION, multiple=True, help="default: every partition")
@click.pass_context
def delete_records(ctx, topic, offset, partitions):
    """Delete records below an offset (Kafka's kafka-delete-records); prints TOPIC:PARTITION:LOW_WATERMARK.

    As Kafka's ``DeleteRecordsCommand.execute``, every partition's outcome is printed: a partition
    that fails does not hide the ones that were truncated. The exit status is 1 if any failed."""
    from broker.client import TopicPartition
    failed = 0
    with open_admin(ctx) as admin:
        if not partitions:
            partitions = partitions_of(admin, topic)
        futures = admin.delete_records({TopicPartition(topic, p): offset for p in partitions})
        for tp, future in sorted(futures.items(), key=lambda kv: kv[0].partition):
            try:
                click.echo(f"{topic}:{tp.partition}:{future.result().low_watermark}")
            except RiverlogError as e:
                failed += 1
                click.echo(f"Error: {topic}:{tp.partition}: {e.name}: {e.message}", err=True)
    if failed:
        ctx.exit(1)
