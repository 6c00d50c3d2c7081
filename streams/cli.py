"""``riverlog streams``: query a running application's store from its committed changelog.

    riverlog streams query APP STORE KEY              # one key: its value, or nothing (exit 1)
    riverlog streams query APP STORE --range FROM TO  # key-value stores: FROM <= key <= TO
    riverlog streams query APP STORE --all            # every entry

A process without the topology does not know the store's kind or the application's serdes, and
needs neither: changelogs are written with Riverlog's state codec (``streams.state_codec``:
canonical JSON keys, pickled values), whatever serdes the topics use, so the kind is told from
the entries' tags and keys and values decode as the application held them. Each entry prints as
one JSON line ``{"key": ..., "value": ...}`` (window and session stores add ``start``/``end``; a
window's end is its start plus the size the window store recorded in its changelog, and is left
out when the changelog holds none); values JSON cannot hold (bytes, Rows, objects) print as their
``repr``. A KEY is matched as a string first, then as JSON (``42``, ``[1, "a"]``) when no string
key matches; ``--range`` bounds are read the same way: as strings, then, when no key is in that
range, as JSON. Without the serdes, keys are ordered by value, not by serialized bytes (see
``streams.testing.ReadOnlyStore``). Registered in ``riverlog`` through the ``riverlog.cli`` entry
point group.
"""
from __future__ import annotations

import json
import os

import click

from broker.errors import RiverlogError
from streams.interactive import read_changelog, store_kind, window_size
from streams.stores import StoreSpec
from streams.read_only_stores import ReadOnlyStore
from streams.topology import changelog_topic

BOOTSTRAP_ENV = "RIVERLOG_BOOTSTRAP_SERVERS"

__all__ = ["streams"]


@click.group()
def streams():
    """Kafka Streams applications on Spark: interactive queries [kafka-streams IQ]."""


def _json(x):
    if isinstance(x, (str, int, float, bool)) or x is None:
        return x
    if isinstance(x, (list, tuple)):
        return [_json(v) for v in x]
    if isinstance(x, dict):
        return {str(k): _json(v) for k, v in x.items()}
    if hasattr(x, "asDict"):
        return _json(x.asDict(recursive=True))
    return repr(x)


def _line(key, value, window=None, with_end: bool = True) -> str:
    entry = {"key": _json(key)}
    if window is not None:
        entry.update(start=window.start, end=window.end) if with_end else entry.update(start=window.start)
    entry["value"] = _json(value)
    return json.dumps(entry, ensure_ascii=False)


def _range_candidates(low: str, high: str) -> list[tuple]:
    """The readings of --range FROM TO, as KEY's: both as strings, then both as JSON (a bound that
    is not JSON stays a string)."""
    parsed = [(_key_candidates(b) + [b])[1] for b in (low, high)]
    return [(low, high)] + ([tuple(parsed)] if parsed != [low, high] else [])


def _key_candidates(text: str) -> list:
    out = [text]
    try:
        parsed = json.loads(text)
    except ValueError:
        return out
    if parsed != text:
        out.append(parsed)       # a Json-serde key is stored as the list it decodes to
        if isinstance(parsed, list):
            out.append(tuple(parsed))
    return out


@streams.command("query")
@click.argument("app")
@click.argument("store")
@click.argument("key", required=False)
@click.option("--bootstrap-server", "-b", default=None, help=f"host:port of any broker (${BOOTSTRAP_ENV})")
@click.option("--range", "key_range", nargs=2, default=None, metavar="FROM TO",
              help="key-value stores: every entry with FROM <= key <= TO, by key")
@click.option("--all", "every", is_flag=True, help="every entry of the store")
@click.option("--timeout", default=30.0, show_default=True, help="seconds to wait for the broker")
@click.pass_context
def query(ctx, app, store, key, bootstrap_server, key_range, every, timeout):
    """Print STORE of application APP as of its last committed batch (one JSON line per entry)."""
    if sum(x is not None and x is not False for x in (key, key_range, every or None)) != 1:
        raise click.UsageError("give exactly one of KEY, --range FROM TO, --all")
    servers = (bootstrap_server or (ctx.obj or {}).get("bootstrap") or os.environ.get(BOOTSTRAP_ENV)
               or "127.0.0.1:9092")
    topic = changelog_topic(app, store)
    try:
        backings = read_changelog({"bootstrap.servers": servers}, topic, timeout)
    except KeyError:
        backings = []
    except RiverlogError as e:
        raise click.ClickException(str(e)) from None
    if not backings:
        raise click.ClickException(f"no changelog topic {topic!r}: is {store!r} a logged store of {app!r}?")
    kind = store_kind(backings) or "keyValue"
    size = window_size(backings) if kind == "window" else None
    spec = StoreSpec(store, kind, retention=2 ** 62, window_size=size or 0)
    view = ReadOnlyStore(store, [spec.open(b) for b in backings], kind=kind)
    with_end = kind != "window" or size is not None
    if kind != "keyValue" and key_range is not None:
        raise click.UsageError(f"--range reads key-value stores; {store!r} is a {kind} store")
    if every or key_range is not None:
        if key_range is None:
            entries = view.all()
        else:
            for low, high in _range_candidates(*key_range):
                entries = view.range(low, high)
                if entries:
                    break
        for k, v in entries:
            click.echo(_line(k.key, v, k, with_end) if kind != "keyValue" else _line(k, v))
        return
    for candidate in _key_candidates(key):
        found = _lookup(view, kind, candidate, with_end)
        if found:
            for line in found:
                click.echo(line)
            return
    ctx.exit(1)


def _lookup(view: ReadOnlyStore, kind: str, key, with_end: bool) -> list[str]:
    try:
        if kind == "keyValue":
            value = view.get(key)
            return [] if value is None else [_line(key, value)]
        return [_line(w.key, v, w, with_end) for w, v in view.all() if w.key == key]
    except TypeError:   # a JSON candidate that is not a valid key (unhashable)
        return []
