"""What every ``riverlog`` command group shares: the error-reporting click group, the admin client
of the command's ``--bootstrap-server``, ``key=value`` options, a topic's partitions and tables.

    @click.group(cls=ReportErrors)
    def topics(): ...

    with open_admin(ctx) as admin:
        for p in partitions_of(admin, "orders"): ...
"""
from __future__ import annotations

import os

import click

from broker.errors import RiverlogError

DEFAULT_BOOTSTRAP = os.environ.get("RIVERLOG_BOOTSTRAP_SERVERS", "127.0.0.1:9092")


class ReportErrors(click.Group):
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


def partitions_of(admin, topic: str) -> list[int]:
    """The topic's partition numbers, in order; raises the topic's error (e.g. it does not exist)."""
    info = admin.list_topics(topic).topics[topic]
    if info.error is not None:
        raise info.error
    return sorted(info.partitions)


def table(rows: list[list[str]]) -> None:
    """Print rows as left-aligned columns two spaces apart (the first row is the header)."""
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        click.echo("  ".join(str(v).ljust(w) for v, w in zip(row, widths)).rstrip())
