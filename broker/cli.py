"""The ``riverlog`` command line: run a broker or a cluster, manage topics, produce, consume, offsets.

    riverlog broker start --data-dir /tmp/rl --port 9092 --config log.segment.bytes=1048576
    riverlog cluster start --nodes 3 --data-dir /tmp/rl       # three local nodes, for development
    riverlog cluster status
    riverlog topics create orders --partitions 3 --config retention.ms=86400000
    riverlog produce orders --file events.txt --key-separator :
    riverlog consume orders --from-beginning --max-messages 10 --print-key
    riverlog offsets orders --time 2026-11-01T00:00:00
    riverlog delete-records orders --partition 0 --offset 1000
    riverlog groups describe billing
    riverlog groups reset-offsets billing --topic orders --to-earliest --execute
    riverlog transactions describe-producers --topic invoices

Every command but ``broker start`` talks to ``--bootstrap-server`` (default: $RIVERLOG_BOOTSTRAP_SERVERS
or 127.0.0.1:9092). Errors print the typed error's name and message and exit with status 1; a bad
option value (``broker.cli_params`` types) prints click's ``Error: Invalid value ...`` line and exits
with status 2; a file system or network failure prints its reason and the path, exit status 1.
"""
from __future__ import annotations

import faulthandler
import logging
import os
import signal
import sys

import click

from broker.cli_params import (COUNT, DATA_DIR, INT32_MAX, INT64_MAX, LOG_LEVEL, NODE_ID, OFFSET, PARTITION, PORT,
                               POSITIVE, QUORUM, TIMESTAMP, _Range, check_broker_values, check_listener_free)
from broker.errors import RiverlogError

DEFAULT_BOOTSTRAP = os.environ.get("RIVERLOG_BOOTSTRAP_SERVERS", "127.0.0.1:9092")


def _pairs(values, what: str) -> dict[str, str]:
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{what} must look like key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


PARTITION_COUNT = _Range(-1, INT32_MAX, "use 1 or more, or -1 for the broker's default")
REPLICATION_FACTOR = _Range(-1, 32767, "use 1 or more, or -1 for the broker's default")


class _Group(click.Group):
    """Turns typed Riverlog errors, and file system or network failures, into one clear line and
    exit status 1."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except RiverlogError as e:
            click.echo(f"Error: {e.name}: {e.message}", err=True)
            ctx.exit(1)
        except OSError as e:
            where = f" ({e.filename})" if e.filename else ""
            click.echo(f"Error: {e.strerror or e}{where}; check the path and its permissions", err=True)
            ctx.exit(1)


@click.group(cls=_Group)
@click.option("--bootstrap-server", "-b", default=DEFAULT_BOOTSTRAP, show_default=True,
              help="host:port of any broker")
@click.pass_context
def main(ctx, bootstrap_server):
    """Riverlog: a Kafka-style log broker for Spark pipelines."""
    ctx.obj = {"bootstrap": bootstrap_server}


# ----------------------------------------------------------------------------------- broker
@main.group(cls=_Group)
def broker():
    """Run a broker."""


@broker.command("start")
@click.option("--data-dir", type=DATA_DIR, default=None, help="log.dirs: where partitions and metadata live")
@click.option("--host", default=None, help="interface to listen on (default 127.0.0.1)")
@click.option("--port", type=PORT, default=None, help="port to listen on (default 9092; 0 picks a free one)")
@click.option("--node-id", type=NODE_ID, default=None, help="node.id")
@click.option("--roles", default=None, help="process.roles: broker, controller or broker,controller (default)")
@click.option("--controller-quorum", type=QUORUM, default=None,
              help="controller.quorum.voters: id@host:port,... (default: this node alone)")
@click.option("--properties", "properties_file", type=click.Path(exists=True, dir_okay=False),
              help="a server.properties file")
@click.option("--config", "-c", "overrides", multiple=True, help="key=value broker config (repeatable)")
@click.option("--log-level", type=LOG_LEVEL, default="INFO", show_default=True)
def broker_start(data_dir, host, port, node_id, roles, controller_quorum, properties_file, overrides, log_level):
    """Start a node in the foreground; SIGTERM or Ctrl-C stops it cleanly (leadership moves first)."""
    from broker.config import BROKER_CONFIG, read_properties
    from broker.server.listeners import with_client_address
    from broker.server.service import BrokerServer

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    values = read_properties(properties_file) if properties_file else {}
    values.update(_pairs(overrides, "--config"))
    if data_dir:
        values["log.dirs"] = data_dir
    if node_id is not None:
        values["node.id"] = node_id
    if roles is not None:
        values["process.roles"] = roles
    if controller_quorum is not None:
        values["controller.quorum.voters"] = controller_quorum
    check_broker_values(values)
    config = BROKER_CONFIG.parse(values)
    if host is not None or port is not None:
        config = BROKER_CONFIG.parse({**values, "listeners": with_client_address(config, host, port)})
    _check_listeners_free(config)
    # A node alone is its own quorum and is ready within a moment; in a quorum it waits for peers.
    server = BrokerServer(config).start(wait_ready=0 if config["controller.quorum.voters"] else 30)
    click.echo(f"Riverlog node {server.broker.node_id} ({server.config['process.roles']}) listening on "
               f"{server.bootstrap_servers}", err=False)
    if server.inter_broker_port is not None:
        click.echo(f"Riverlog node {server.broker.node_id} inter-broker listener on "
                   f"{server.host}:{server.inter_broker_port}")
    sys.stdout.flush()

    def stop(signum, frame):
        server._stopped.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server.wait()
    # A stop that hangs past the controlled-shutdown bound prints every thread's stack to stderr.
    faulthandler.dump_traceback_later(config["controlled.shutdown.timeout.ms"] / 1000.0 + 10.0)
    server._stopped.clear()
    server.stop()
    faulthandler.cancel_dump_traceback_later()


def _check_listeners_free(config) -> None:
    """A bad listener plan or a port in use fails here as one line, not as a bind traceback."""
    from broker.server.controller_runtime import parse_voters
    from broker.server.listeners import plan_listeners
    voter = parse_voters(config["controller.quorum.voters"]).get(config["node.id"]) \
        if "controller" in config["process.roles"] else None
    plan = plan_listeners(config, voter)
    for what, address in (("listener", plan.client), ("inter-broker listener", plan.inter_broker),
                          ("controller listener", plan.controller)):
        if address is not None:
            check_listener_free(f"{address[0]}:{address[1]}", what)


# ----------------------------------------------------------------------------------- topics
def _admin(ctx):
    from broker.client import AdminClient
    return AdminClient({"bootstrap.servers": ctx.obj["bootstrap"]})


@main.group(cls=_Group)
def topics():
    """Create, list, describe, alter and delete topics."""


@topics.command("create")
@click.argument("name")
@click.option("--partitions", "-p", type=PARTITION_COUNT, default=-1, help="default: the broker's num.partitions")
@click.option("--replication-factor", "-r", type=REPLICATION_FACTOR, default=-1)
@click.option("--config", "-c", "configs", multiple=True, help="key=value topic config (repeatable)")
@click.option("--if-not-exists", is_flag=True, help="succeed quietly when the topic exists")
@click.pass_context
def topics_create(ctx, name, partitions, replication_factor, configs, if_not_exists):
    from broker.client import NewTopic
    from broker.errors import TopicAlreadyExistsError
    with _admin(ctx) as admin:
        future = admin.create_topics([NewTopic(name, partitions, replication_factor, _pairs(configs, "--config"))])[name]
        try:
            future.result()
        except TopicAlreadyExistsError:
            if not if_not_exists:
                raise
    click.echo(f"Created topic {name}.")


@topics.command("list")
@click.option("--all", "show_internal", is_flag=True, help="include internal topics")
@click.pass_context
def topics_list(ctx, show_internal):
    with _admin(ctx) as admin:
        md = admin.list_topics()
    for name in sorted(md.topics):
        if show_internal or not name.startswith("__"):
            click.echo(name)


@topics.command("describe")
@click.argument("names", nargs=-1)
@click.pass_context
def topics_describe(ctx, names):
    from broker.client import ConfigResource
    with _admin(ctx) as admin:
        md = admin.list_topics()
        wanted = names or sorted(n for n in md.topics if not n.startswith("__"))
        for name in wanted:
            topic = md.topics.get(name)
            if topic is None or topic.error is not None:
                from broker.errors import UnknownTopicOrPartitionError
                raise UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
            entries = admin.describe_configs([ConfigResource("topic", name)])
            configs = next(iter(entries.values())).result()
            overrides = ",".join(f"{k}={e.value}" for k, e in sorted(configs.items())
                                 if e.source == "DYNAMIC_TOPIC_CONFIG")
            parts = topic.partitions
            rf = len(next(iter(parts.values())).replicas) if parts else 0
            click.echo(f"Topic: {name}\tTopicId: {topic.topic_id}\tPartitionCount: {len(parts)}\t"
                       f"ReplicationFactor: {rf}\tConfigs: {overrides}")
            for p in sorted(parts.values(), key=lambda x: x.partition):
                click.echo(f"\tTopic: {name}\tPartition: {p.partition}\tLeader: {p.leader}\t"
                           f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}")


@topics.command("delete")
@click.argument("name")
@click.pass_context
def topics_delete(ctx, name):
    with _admin(ctx) as admin:
        admin.delete_topics([name])[name].result()
    click.echo(f"Deleted topic {name}.")


@topics.command("elect-leaders")
@click.argument("name")
@click.option("--partition", "-p", "partitions", type=PARTITION, multiple=True, help="default: every partition")
@click.pass_context
def topics_elect_leaders(ctx, name, partitions):
    """Move leadership back to the preferred (first) replicas that are in sync."""
    with _admin(ctx) as admin:
        admin.elect_leaders(name, list(partitions) or None).result()
    click.echo(f"Preferred leaders elected for {name}.")


@topics.command("alter")
@click.argument("name")
@click.option("--add-config", "-a", "add", multiple=True, help="key=value to set (repeatable)")
@click.option("--delete-config", "-d", "delete", multiple=True, help="key to return to its default")
@click.option("--partitions", type=POSITIVE, default=None, help="grow the topic to this many partitions")
@click.pass_context
def topics_alter(ctx, name, add, delete, partitions):
    from broker.client import AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions
    if partitions is not None:
        with _admin(ctx) as admin:
            admin.create_partitions([NewPartitions(name, partitions)])[name].result()
        click.echo(f"Topic {name} now has {partitions} partitions.")
        if not add and not delete:
            return
    resource = ConfigResource("topic", name)
    for key, value in _pairs(add, "--add-config").items():
        resource.add_incremental_config(ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET))
    for key in delete:
        resource.add_incremental_config(ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE))
    with _admin(ctx) as admin:
        next(iter(admin.incremental_alter_configs([resource]).values())).result()
    click.echo(f"Altered configs of topic {name}.")


# ----------------------------------------------------------------------------------- produce
@main.command()
@click.argument("topic")
@click.option("--file", "-f", "path", type=click.Path(exists=True, dir_okay=False),
              help="read lines from this file (default: standard input)")
@click.option("--key-separator", "-k", default=None, help="split each line into key and value at this")
@click.option("--partition", type=PARTITION, default=None, help="default: chosen by the partitioner")
@click.option("--header", "-H", "headers", multiple=True, help="key=value header on every record")
@click.option("--acks", default="all", show_default=True, type=click.Choice(["0", "1", "all", "-1"]))
@click.option("--compression", default="none", show_default=True, type=click.Choice(["none", "lz4", "zstd"]))
@click.option("--config", "-c", "configs", multiple=True, help="key=value producer config")
@click.pass_context
def produce(ctx, topic, path, key_separator, partition, headers, acks, compression, configs):
    """Send each input line as one record (a console producer)."""
    from tqdm import tqdm

    from broker.client import Producer
    config = {"bootstrap.servers": ctx.obj["bootstrap"], "acks": acks, "compression.type": compression}
    config.update(_pairs(configs, "--config"))
    header_list = [(k, v.encode()) for k, v in _pairs(headers, "--header").items()] or None
    failures = []

    def on_delivery(err, msg):
        if err is not None:
            failures.append(err)

    producer = Producer(config)
    stream = open(path, "rb") if path else sys.stdin.buffer
    progress = tqdm(total=os.path.getsize(path), unit="B", unit_scale=True, desc=topic) if path else None
    sep = key_separator.encode() if key_separator else None
    count = 0
    try:
        for line in stream:
            if progress is not None:
                progress.update(len(line))
            line = line.rstrip(b"\r\n")
            key = None
            if sep is not None:
                key, found, value = line.partition(sep)
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
        raise failures[0] if failures else RiverlogError(f"{left} record(s) were not acknowledged in time")
    click.echo(f"Produced {count} record(s) to {topic}.", err=True)


def _produce_retrying(producer, topic, value, key, partition, headers, on_delivery):
    while True:
        try:
            producer.produce(topic, value=value, key=key, partition=partition, headers=headers,
                             on_delivery=on_delivery)
            return
        except BufferError:
            producer.poll(0.1)


# ----------------------------------------------------------------------------------- consume
@main.command()
@click.argument("topic")
@click.option("--from-beginning", is_flag=True, help="start at the earliest offset (default: the end)")
@click.option("--partition", "-p", type=PARTITION, default=None, help="only this partition")
@click.option("--offset", "-o", type=OFFSET, default=None, help="start at this offset (needs --partition)")
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
    from broker.client import OFFSET_BEGINNING, OFFSET_END, AdminClient, Consumer, TopicPartition
    if offset is not None and partition is None:
        raise click.UsageError("--offset needs --partition")
    with AdminClient({"bootstrap.servers": ctx.obj["bootstrap"]}) as admin:
        info = admin.list_topics(topic).topics[topic]
        if info.error is not None:
            raise info.error
        partitions = sorted(info.partitions) if partition is None else [partition]
    start = offset if offset is not None else (OFFSET_BEGINNING if from_beginning else OFFSET_END)
    consumer = Consumer({"bootstrap.servers": ctx.obj["bootstrap"], "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, start) for p in partitions])
    seen = 0
    try:
        while max_messages is None or seen < max_messages:
            msg = consumer.poll(None if timeout_ms is None else timeout_ms / 1000.0)
            if msg is None:
                break
            if msg.error():
                raise msg.error()
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
@main.command()
@click.argument("topic")
@click.option("--time", "-t", "when", type=TIMESTAMP, default="latest", show_default=True,
              help="earliest, latest, max-timestamp, ms since the epoch, or ISO-8601 (UTC if no zone)")
@click.option("--partition", "-p", type=PARTITION, default=None)
@click.pass_context
def offsets(ctx, topic, when, partition):
    """Print TOPIC:PARTITION:OFFSET for each partition at a point in time."""
    from broker.client import OffsetSpec, TopicPartition
    spec = OffsetSpec(when)
    with _admin(ctx) as admin:
        info = admin.list_topics(topic).topics[topic]
        if info.error is not None:
            raise info.error
        parts = sorted(info.partitions) if partition is None else [partition]
        futures = admin.list_offsets({TopicPartition(topic, p): spec for p in parts})
        for tp, future in sorted(futures.items(), key=lambda kv: kv[0].partition):
            click.echo(f"{topic}:{tp.partition}:{future.result().offset}")


@main.command("delete-records")
@click.argument("topic")
@click.option("--offset", "-o", type=_Range(-1, INT64_MAX, "use an offset of 0 or more, or -1"), required=True,
              help="delete every record below this offset; -1: everything up to the high watermark")
@click.option("--partition", "-p", "partitions", type=PARTITION, multiple=True, help="default: every partition")
@click.pass_context
def delete_records(ctx, topic, offset, partitions):
    """Delete records below an offset (Kafka's kafka-delete-records); prints TOPIC:PARTITION:LOW_WATERMARK."""
    from broker.client import TopicPartition
    with _admin(ctx) as admin:
        if not partitions:
            info = admin.list_topics(topic).topics[topic]
            if info.error is not None:
                raise info.error
            partitions = sorted(info.partitions)
        futures = admin.delete_records({TopicPartition(topic, p): offset for p in partitions})
        for tp, future in sorted(futures.items(), key=lambda kv: kv[0].partition):
            click.echo(f"{topic}:{tp.partition}:{future.result().low_watermark}")


if __name__ == "__main__":
    main()


from broker.cli_cluster import cluster  # noqa: E402 - registers the `cluster` group on main
from broker.cli_groups import groups  # noqa: E402
from broker.cli_transactions import transactions  # noqa: E402

main.add_command(cluster)
main.add_command(groups)
main.add_command(transactions)
