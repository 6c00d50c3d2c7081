"""Records from the command line: ``produce``, ``consume``, ``offsets`` and ``delete-records``.

    riverlog produce orders --file events.txt --key-separator :
    riverlog consume orders --from-beginning --max-messages 10 --print-key
    riverlog offsets orders --time 2026-11-01T00:00:00
    riverlog delete-records orders --partition 0 --offset 1000

These are top-level commands (as Kafka's console producer and consumer are tools of their own);
``broker.cli`` adds them to the ``riverlog`` group.
"""
from __future__ import annotations

import os
import re
import sys

import click

from broker.cli.common import open_admin, pairs, partitions_of
from broker.cli.params import COUNT, INT64_MAX, NAMED_TIMES, OFFSET_OR_HIGH_WATERMARK, PARTITION, TIMESTAMP
from broker.errors import RiverlogError


@click.command()
@click.argument("topic")
@click.option("--file", "-f", "path", type=click.Path(exists=True, dir_okay=False),
              help="read lines from this file (default: standard input)")
@click.option("--key-separator", "-k", default=None, help="split each line into key and value at this")
@click.option("--ignore-error", is_flag=True,
              help="with --key-separator: send a line without the separator as a value with a null key "
                   "(else the line stops the producer, as Kafka's console producer)")
@click.option("--partition", type=PARTITION, default=None, help="default: chosen by the partitioner")
@click.option("--header", "-H", "headers", multiple=True, help="key=value header on every record")
@click.option("--acks", default="all", show_default=True, type=click.Choice(["0", "1", "all", "-1"]))
@click.option("--compression", default="none", show_default=True, type=click.Choice(["none", "lz4", "zstd"]))
@click.option("--config", "-c", "configs", multiple=True, help="key=value producer config")
@click.pass_context
def produce(ctx, topic, path, key_separator, ignore_error, partition, headers, acks, compression, configs):
    """Send each input line as one record (a console producer)."""
    from tqdm import tqdm

    from broker.client import Producer
    config = {"bootstrap.servers": ctx.obj["bootstrap"], "acks": acks, "compression.type": compression}
    config.update(pairs(configs, "--config"))
    header_list = _headers(headers) or None
    failures = []

    def on_delivery(err, msg):
        if err is not None:
            failures.append(err)

    producer = Producer(config)
    stream = open(path, "rb") if path else sys.stdin.buffer
    progress = tqdm(total=os.path.getsize(path), unit="B", unit_scale=True, desc=topic) if path else None
    sep = key_separator.encode() if key_separator else None
    count = 0
    missing_separator = None
    try:
        for number, line in enumerate(_read_lines(stream, progress), 1):
            key = None
            if sep is not None:
                key, found, value = line.partition(sep)
                if not found and not ignore_error:
                    missing_separator = number
                    break
                if not found:
                    key, value = None, line
            else:
                value = line
            _produce_retrying(producer, topic, value, key, -1 if partition is None else partition,
                              header_list, on_delivery)
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
    if missing_separator is not None:
        raise click.ClickException(f"no key separator {key_separator!r} found on line {missing_separator}; the lines "
                                   "before it were sent. Add --ignore-error to send such lines with a null key")


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


@click.command()
@click.argument("topic")
@click.option("--from-beginning", is_flag=True, help="start at the earliest offset (default: the end)")
@click.option("--partition", "-p", type=PARTITION, default=None, help="only this partition")
@click.option("--offset", "-o", type=CONSOLE_OFFSET, default=None,
              help="earliest, latest or an offset >= 0 to start at (needs --partition); past the end: the end")
@click.option("--max-messages", "-n", type=COUNT, default=None, help="stop after this many records")
@click.option("--timeout-ms", type=COUNT, default=None, help="stop when nothing arrives for this long")
@click.option("--print-key", is_flag=True)
@click.option("--print-headers", is_flag=True)
@click.option("--print-timestamp", is_flag=True)
@click.option("--print-offset", is_flag=True)
@click.option("--separator", default="\t", show_default=True, help="between printed fields")
@click.option("--isolation-level", type=click.Choice(["read_uncommitted", "read_committed"]), default=None,
              help="read_committed hides records of open and aborted transactions (default: read_uncommitted, "
                   "as Kafka's console consumer)")
@click.option("--consumer-property", "consumer_properties", multiple=True,
              help="key=value consumer config (repeatable), e.g. isolation.level=read_committed")
@click.pass_context
def consume(ctx, topic, from_beginning, partition, offset, max_messages, timeout_ms, print_key,
            print_headers, print_timestamp, print_offset, separator, isolation_level, consumer_properties):
    """Print records of a topic, one per line (a console consumer)."""
    from broker.client import OFFSET_BEGINNING, OFFSET_END, Consumer, TopicPartition
    if offset is not None and partition is None:
        raise click.UsageError("--offset needs --partition")
    if offset is not None and from_beginning:
        raise click.UsageError("--offset and --from-beginning cannot be given together: pick one start")
    config = _console_consumer_config(ctx.obj["bootstrap"], pairs(consumer_properties, "--consumer-property"),
                                      isolation_level, from_beginning)
    with open_admin(ctx) as admin:
        every = partitions_of(admin, topic)
    partitions = every if partition is None else [partition]
    start = offset if offset is not None else (OFFSET_BEGINNING if from_beginning else OFFSET_END)
    consumer = Consumer(config)
    consumer.assign([TopicPartition(topic, p, start) for p in partitions])
    seen = 0
    try:
        while max_messages is None or seen < max_messages:
            msg = consumer.poll(None if timeout_ms is None else timeout_ms / 1000.0)
            if msg is None:
                break
            if msg.error():
                raise msg.error().exception()
            click.echo(_format(msg, print_key, print_headers, print_timestamp, print_offset, separator))
            seen += 1
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()
    click.echo(f"Processed a total of {seen} messages", err=True)


def _console_consumer_config(bootstrap: str, properties: dict, isolation_level: str | None,
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


def _text(data) -> str:
    if data is None:
        return "null"
    return data.decode("utf-8", errors="backslashreplace")


def _format(msg, key, headers, timestamp, offset, sep) -> str:
    fields = []
    if timestamp:
        kind, ts = msg.timestamp()
        fields.append(f"{'LogAppendTime' if kind == 2 else 'CreateTime'}:{ts}")
    if offset:
        fields.append(f"Partition:{msg.partition()}\tOffset:{msg.offset()}")
    if headers:
        fields.append(",".join(f"{k}:{_text(v)}" for k, v in (msg.headers() or [])) or "NO_HEADERS")
    if key:
        fields.append(_text(msg.key()))
    fields.append(_text(msg.value()))
    return sep.join(fields)


# ----------------------------------------------------------------------------------- offsets
@click.command()
@click.argument("topic")
@click.option("--time", "-t", "when", type=TIMESTAMP, default="latest", show_default=True,
              help="earliest, latest, max-timestamp, earliest-local, latest-tiered, ms since the epoch, "
                   "or ISO-8601 (UTC if no zone)")
@click.option("--partition", "-p", type=PARTITION, default=None)
@click.pass_context
def offsets(ctx, topic, when, partition):
    """Print TOPIC:PARTITION:OFFSET for each partition at a point in time.

    As Kafka's ``GetOffsetShell.fetchOffsets``, a partition with no such offset (no record at or
    after the time) is left out, and one that fails is skipped with its error on stderr.
    earliest-local is the log start (every segment is local); latest-tiered has no offset, as
    Kafka answers for a log without remote storage."""
    from broker.client import OffsetSpec, TopicPartition
    if when == NAMED_TIMES["latest-tiered"]:
        return
    spec = OffsetSpec(NAMED_TIMES["earliest"] if when == NAMED_TIMES["earliest-local"] else when)
    with open_admin(ctx) as admin:
        every = partitions_of(admin, topic)
        parts = every if partition is None else [partition]
        futures = admin.list_offsets({TopicPartition(topic, p): spec for p in parts})
        for tp, future in sorted(futures.items(), key=lambda kv: kv[0].partition):
            try:
                offset = future.result().offset
            except RiverlogError as e:
                click.echo(f"Skip getting offsets for topic-partition {topic}-{tp.partition} due to error: "
                           f"{e.name}: {e.message}", err=True)
                continue
            if offset >= 0:
                click.echo(f"{topic}:{tp.partition}:{offset}")


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
