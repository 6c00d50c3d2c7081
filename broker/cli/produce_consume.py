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
import sys

import click

from broker.cli.common import open_admin, pairs, partitions_of
from broker.cli.params import COUNT, INT64_MAX, OFFSET_OR_HIGH_WATERMARK, PARTITION, TIMESTAMP
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
    header_list = [(k, v.encode()) for k, v in pairs(headers, "--header").items()] or None
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
        for number, line in enumerate(stream, 1):
            if progress is not None:
                progress.update(len(line))
            line = line.rstrip(b"\r\n")
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
@click.pass_context
def consume(ctx, topic, from_beginning, partition, offset, max_messages, timeout_ms, print_key,
            print_headers, print_timestamp, print_offset, separator):
    """Print records of a topic, one per line (a console consumer)."""
    from broker.client import OFFSET_BEGINNING, OFFSET_END, Consumer, TopicPartition
    if offset is not None and partition is None:
        raise click.UsageError("--offset needs --partition")
    if offset is not None and from_beginning:
        raise click.UsageError("--offset and --from-beginning cannot be given together: pick one start")
    with open_admin(ctx) as admin:
        every = partitions_of(admin, topic)
    partitions = every if partition is None else [partition]
    start = offset if offset is not None else (OFFSET_BEGINNING if from_beginning else OFFSET_END)
    # Kafka's console consumer: an offset out of range moves to the end unless --from-beginning
    consumer = Consumer({"bootstrap.servers": ctx.obj["bootstrap"],
                         "auto.offset.reset": "earliest" if from_beginning else "latest"})
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
              help="earliest, latest, max-timestamp, ms since the epoch, or ISO-8601 (UTC if no zone)")
@click.option("--partition", "-p", type=PARTITION, default=None)
@click.pass_context
def offsets(ctx, topic, when, partition):
    """Print TOPIC:PARTITION:OFFSET for each partition at a point in time."""
    from broker.client import OffsetSpec, TopicPartition
    spec = OffsetSpec(when)
    with open_admin(ctx) as admin:
        every = partitions_of(admin, topic)
        parts = every if partition is None else [partition]
        futures = admin.list_offsets({TopicPartition(topic, p): spec for p in parts})
        for tp, future in sorted(futures.items(), key=lambda kv: kv[0].partition):
            click.echo(f"{topic}:{tp.partition}:{future.result().offset}")


@click.command("delete-records")
@click.argument("topic")
@click.option("--offset", "-o", type=OFFSET_OR_HIGH_WATERMARK, required=True,
              help="delete every record below this offset; -1: everything up to the high watermark")
@click.option("--partition", "-p", "partitions", type=PARTITION, multiple=True, help="default: every partition")
@click.pass_context
def delete_records(ctx, topic, offset, partitions):
    """Delete records below an offset (Kafka's kafka-delete-records); prints TOPIC:PARTITION:LOW_WATERMARK."""
    from broker.client import TopicPartition
    with open_admin(ctx) as admin:
        if not partitions:
            partitions = partitions_of(admin, topic)
        futures = admin.delete_records({TopicPartition(topic, p): offset for p in partitions})
        for tp, future in sorted(futures.items(), key=lambda kv: kv[0].partition):
            click.echo(f"{topic}:{tp.partition}:{future.result().low_watermark}")

