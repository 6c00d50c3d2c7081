"""The ``riverlog`` command line: run a broker or a cluster, manage topics, produce, consume, offsets.

    riverlog broker start --data-dir /tmp/rl --port 9092 --config log.segment.bytes=1048576
    riverlog cluster start --nodes 3 --data-dir /tmp/rl       # three local nodes, for development
    riverlog cluster status
    riverlog topics create orders --partitions 3 --config retention.ms=86400000
    riverlog configs --entity-type topics --entity-name orders --describe
    riverlog produce orders --file events.txt --key-separator :
    riverlog consume orders --from-beginning --max-messages 10 --print-key
    riverlog offsets orders --time 2026-11-01T00:00:00
    riverlog delete-records orders --partition 0 --offset 1000
    riverlog groups describe billing
    riverlog groups reset-offsets billing --topic orders --to-earliest --execute
    riverlog transactions describe-producers --topic invoices
    riverlog connect standalone --worker worker.properties file-source.json   # from connect/, an entry point

One module per command group (``broker_cmd``, ``cluster``, ``metadata_quorum``, ``topics``, ``configs``,
``produce_consume``, ``get_offsets``, ``groups``, ``transactions``; ``groups reset-offsets`` in ``reset_offsets``, the
groups' selection in ``group_selection``), their shared helpers in ``common`` and option types in
``params``. The pure cores of Kafka's tools' formats are modules of their own: ``line_reader``
(console producer), ``message_formatter`` and ``console_options`` (console consumer and producer
options), ``properties_file``, ``topic_partition_filter`` (kafka-get-offsets) and
``topic_description`` (kafka-topics --describe), ``group_description`` (kafka-consumer-groups
--describe).
Every command is registered here, when the package is imported (those of packages above the broker
by name, imported when used), so ``riverlog``, ``python -m broker`` and ``python -m broker.cli``
offer the same commands.

Every command but ``broker start`` talks to ``--bootstrap-server`` (default: $RIVERLOG_BOOTSTRAP_SERVERS
or 127.0.0.1:9092), given before the command or after it, as Kafka's tools take it
(``common.kafka_habits`` adds it to every command, with Kafka's tool name in ``--help``). Errors print the typed error's name and message and exit with status 1; a bad
option value (``broker.cli.params`` types) prints click's ``Error: Invalid value ...`` line and exits
with status 2; a file system or network failure prints its reason and the path, exit status 1.
"""
from __future__ import annotations

import click

from broker.cli import (broker_cmd, cluster, configs, get_offsets, groups, metadata_quorum, produce_consume, topics,
                        transactions)
from broker.cli.common import BOOTSTRAP_ENV, ReportErrors, kafka_habits

__all__ = ["main"]


class _Root(ReportErrors):
    """The root group. Command groups that packages above the broker add (entry point group
    ``riverlog.cli``, e.g. ``connect``, ``streams``) are found by name and imported only when
    named, or listed by ``--help``: the broker imports nothing above it, and a broker command does
    not pay for importing Spark-side packages. A plugin that does not import (its package missing)
    leaves the other commands working."""

    _entry_points: dict | None = None

    def _plugins(self) -> dict:
        """The plugin entry points not yet loaded, read from the installed metadata once."""
        if self._entry_points is None:
            from importlib.metadata import entry_points
            self._entry_points = {ep.name: ep for ep in entry_points(group="riverlog.cli")}
        return {name: ep for name, ep in self._entry_points.items() if name not in self.commands}

    def list_commands(self, ctx):
        return sorted({*self.commands, *self._plugins()})

    def get_command(self, ctx, name):
        command = self.commands.get(name)
        if command is None:
            ep = self._plugins().get(name)
            if ep is None:
                return None
            try:
                command = ep.load()
            except ImportError:
                return None
            self.add_command(command, name)
        return command


@click.group(cls=_Root)
@click.option("--bootstrap-server", "-b", default="127.0.0.1:9092", show_default=True, envvar=BOOTSTRAP_ENV,
              help=f"host:port of any broker (${BOOTSTRAP_ENV}); also accepted after the command")
@click.pass_context
def main(ctx, bootstrap_server):
    """Riverlog: a Kafka-style log broker for Spark pipelines.

    Each command names the Kafka tool it stands for, in brackets.
    """
    ctx.ensure_object(dict).setdefault("bootstrap", bootstrap_server)


for _command in (broker_cmd.broker, cluster.cluster, topics.topics, produce_consume.produce,
                 produce_consume.consume, get_offsets.offsets, produce_consume.delete_records,
                 groups.groups, transactions.transactions, configs.configs, metadata_quorum.metadata_quorum):
    main.add_command(_command)
del _command
kafka_habits(main)
