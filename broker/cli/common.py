"""What every ``riverlog`` command group shares: the error-reporting click group, the admin client
of the command's ``--bootstrap-server``, ``key=value`` options, a topic's partitions and tables.

    @click.group(cls=ReportErrors)
    def topics(): ...

    with open_admin(ctx) as admin:
        for p in partitions_of(admin, "orders"): ...
"""
from __future__ import annotations

import os
import sys

import click

from broker.errors import RiverlogError

BOOTSTRAP_ENV = "RIVERLOG_BOOTSTRAP_SERVERS"
DEFAULT_BOOTSTRAP = os.environ.get(BOOTSTRAP_ENV, "127.0.0.1:9092")

# Kafka's tool for what each command does, shown next to it in --help so Kafka users find their way.
KAFKA_TOOLS = {
    "broker": "kafka-server-start", "broker start": "kafka-server-start",
    "cluster status": "kafka-metadata-quorum describe", "metadata-quorum": "kafka-metadata-quorum",
    "topics": "kafka-topics", "topics create": "kafka-topics --create", "topics list": "kafka-topics --list",
    "topics describe": "kafka-topics --describe", "topics alter": "kafka-topics --alter, kafka-configs",
    "topics delete": "kafka-topics --delete", "topics elect-leaders": "kafka-leader-election",
    "produce": "kafka-console-producer", "consume": "kafka-console-consumer",
    "offsets": "kafka-get-offsets", "delete-records": "kafka-delete-records",
    "groups": "kafka-consumer-groups", "transactions": "kafka-transactions", "configs": "kafka-configs",
}


def _set_bootstrap(ctx, param, value):
    """``--bootstrap-server`` given after the command wins over the one before it."""
    if value is not None:
        root = ctx.find_root()
        root.ensure_object(dict)["bootstrap"] = value
    return value


def bootstrap_option() -> click.Option:
    """``--bootstrap-server``/``-b`` after the command (``riverlog topics create orders
    --bootstrap-server h:9092``), as Kafka's tools take it; before the command works too."""
    return click.Option(["--bootstrap-server", "-b", "bootstrap_server_after"], default=None,
                        expose_value=False, is_eager=True, callback=_set_bootstrap,
                        help=f"host:port of any broker (default: ${BOOTSTRAP_ENV} or 127.0.0.1:9092)")


def kafka_habits(group: click.Group, path: str = "") -> None:
    """One place for what every command takes the Kafka way: ``--bootstrap-server`` after the
    command, and Kafka's tool name next to the command in ``--help``."""
    for name, command in group.commands.items():
        full = f"{path} {name}".strip()
        tool = KAFKA_TOOLS.get(full)
        if tool:
            summary = command.get_short_help_str(limit=60)
            command.short_help = f"[{tool}] {summary}".strip()
        if isinstance(command, click.Group):
            kafka_habits(command, full)
        elif full not in ("broker start", "cluster start") \
                and not any("--bootstrap-server" in p.opts for p in command.params):
            command.params.append(bootstrap_option())


class ReportErrors(click.Group):
    """Turns typed Riverlog errors, and file system or network failures, into one clear line and
    exit status 1."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except RiverlogError as e:
            click.echo(f"Error: {e.name}: {e.message}", err=True)
            ctx.exit(1)
        except BrokenPipeError:
            # the reader went away (`... | head -1`): stop quietly, as Kafka's tools do; standard
            # output goes to /dev/null so that the interpreter's last flush does not fail again
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(0)
        except OSError as e:
            where = f" ({e.filename})" if e.filename else ""
            click.echo(f"Error: {e.strerror or e}{where}; check the path and its permissions", err=True)
            ctx.exit(1)


def pairs(values, what: str) -> dict[str, str]:
    """``key=value`` option values as a dict; anything else is a bad ``what`` option."""
    out = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"{what} must look like key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def open_admin(ctx):
    """An AdminClient of the command's ``--bootstrap-server`` (use it in a ``with``)."""
    from broker.client import AdminClient
    return AdminClient({"bootstrap.servers": ctx.obj["bootstrap"]})


def alter_incrementally(admin, resource, to_add: dict, to_delete) -> None:
    """``resource``'s configs set (``to_add``) and deleted (``to_delete``) in one
    IncrementalAlterConfigs, as kafka-configs and kafka-topics --alter send them."""
    from broker.client import AlterConfigOpType, ConfigEntry
    for key, value in to_add.items():
        resource.add_incremental_config(ConfigEntry(key, value, incremental_operation=AlterConfigOpType.SET))
    for key in to_delete:
        resource.add_incremental_config(ConfigEntry(key, None, incremental_operation=AlterConfigOpType.DELETE))
    next(iter(admin.incremental_alter_configs([resource]).values())).result()


def partitions_of(admin, topic: str) -> list[int]:
    """The topic's partition numbers, in order; raises the topic's error (e.g. it does not exist)."""
    info = admin.list_topics(topic).topics[topic]
    if info.error is not None:
        raise info.error
    return sorted(info.partitions)


def internal_topics(admin, names) -> set[str]:
    """The internal topics among ``names``, as the broker marks them (Kafka's ``Topic.isInternal``:
    ``__consumer_offsets`` and ``__transaction_state``). A user topic whose name merely starts with
    ``__`` is not one, so it is listed and described like any other."""
    from broker.client import TopicCollection
    names = list(names)
    if not names:
        return set()
    internal = set()
    for name, future in admin.describe_topics(TopicCollection(names)).items():
        try:
            if future.result().is_internal:
                internal.add(name)
        except RiverlogError:        # deleted since it was listed
            pass
    return internal


def pretty_table(headers: list[str], rows: list[list[str]]) -> None:
    """Kafka's ``ToolsUtils.prettyPrintTable`` (kafka-transactions): each value padded to its
    column's width, then a tab, every column."""
    widths = [max([len(h)] + [len(str(r[i])) for r in rows]) for i, h in enumerate(headers)]
    for row in [headers] + rows:
        click.echo("".join(str(v).ljust(w) + "\t" for v, w in zip(row, widths)))


def table(rows: list[list[str]]) -> None:
    """Print rows as left-aligned columns two spaces apart (the first row is the header)."""
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo("  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip())
