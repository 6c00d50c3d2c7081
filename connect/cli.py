"""``riverlog connect``: run a standalone worker, and manage connectors over its REST API.

    riverlog connect standalone --worker worker.properties file-source.json jsonl-sink.properties
    riverlog connect list [--expand status]
    riverlog connect create jsonl-sink.json
    riverlog connect status|config|tasks|pause|resume|stop|delete|offsets NAME
    riverlog connect restart NAME [--include-tasks] [--only-failed]
    riverlog connect plugins

``standalone`` is Kafka's ``connect-standalone``: it creates the SparkSession first (its JVM is
forked before any gRPC thread exists in the process), then the worker, the REST API on
``listeners`` (else ``rest.port``), then each connector given (created, or its stored config
replaced: configs persist in the broker, unlike Kafka's standalone mode), and runs until SIGTERM
or SIGINT.
The other commands are an HTTP client of ``--url`` (default $RIVERLOG_CONNECT_URL or
http://127.0.0.1:8083) written with the standard library only. A refused request prints
``Error: <status>: <Connect's message>`` and exits 1. Registered in ``riverlog`` through the
``riverlog.cli`` entry point group, so the broker's command line does not import this package.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

import click

from broker.errors import RiverlogError

URL_ENV = "RIVERLOG_CONNECT_URL"
DEFAULT_URL = "http://127.0.0.1:8083"

__all__ = ["connect"]


class RestCallError(Exception):
    """The REST API refused a request (its status and Connect's message) or could not be reached."""

    def __init__(self, status: int | None, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def call(url: str, method: str, path: str, body: Any = None, timeout: float = 60.0) -> tuple[int, Any]:
    """One REST request: (status, parsed JSON body or None). Connect's error bodies raise
    :class:`RestCallError` with their message."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url.rstrip("/") + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read()
            return response.status, (json.loads(raw) if raw.strip() else None)
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            message = json.loads(raw)["message"]
        except (ValueError, KeyError, TypeError):
            message = raw.decode(errors="replace") or e.reason
        raise RestCallError(e.code, message) from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise RestCallError(None, f"cannot reach the Connect REST API at {url} ({reason}); is a worker running "
                                  f"there? (--url or ${URL_ENV})") from None


class _ReportErrors(click.Group):
    """A refused request, a typed Riverlog error or a file problem: one line and exit status 1."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except RestCallError as e:
            click.echo(f"Error: {e.status}: {e.message}" if e.status else f"Error: {e.message}", err=True)
            ctx.exit(1)
        except RiverlogError as e:
            click.echo(f"Error: {e.name}: {e.message}", err=True)
            ctx.exit(1)
        except OSError as e:
            where = f" ({e.filename})" if e.filename else ""
            click.echo(f"Error: {e.strerror or e}{where}", err=True)
            ctx.exit(1)


def _url_option(f):
    return click.option("--url", default=lambda: os.environ.get(URL_ENV, DEFAULT_URL), show_default=DEFAULT_URL,
                        help=f"the worker's REST API (${URL_ENV})")(f)


def _print(value: Any) -> None:
    click.echo(json.dumps(value, indent=2))


def _quoted(name: str) -> str:
    return urllib.parse.quote(name, safe="")


@click.group(cls=_ReportErrors)
def connect():
    """[connect-standalone, Connect REST API] Run connectors and manage them."""


# ------------------------------------------------------------------------------------- standalone
@connect.command()
@click.option("--worker", "worker_file", required=True, type=click.Path(exists=True, dir_okay=False),
              help="the worker's config, Kafka's worker.properties format")
@click.option("--master", default=None, help="Spark master (default: spark.master of the environment, else local[*])")
@click.option("--conf", "confs", multiple=True, metavar="KEY=VALUE", help="a Spark config, repeatable")
@click.argument("connector_files", nargs=-1, type=click.Path(exists=True, dir_okay=False))
def standalone(worker_file, master, confs, connector_files):
    """[connect-standalone] One worker with the REST API, running the connectors in the files
    (JSON as POST /connectors takes it, or .properties) until SIGTERM or SIGINT."""
    from connect.properties import connector_file, read_properties
    worker_config = read_properties(worker_file)
    connectors = [connector_file(path) for path in connector_files]      # every file checked before Spark starts
    spark_conf = {}
    for item in confs:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"--conf must look like key=value, got {item!r}")
        spark_conf[key.strip()] = value.strip()
    run_standalone(worker_config, connectors, master, spark_conf)


def run_standalone(worker_config: dict, connectors: list[tuple[str, dict, str | None]], master: str | None = None,
                   spark_conf: dict | None = None, stop: threading.Event | None = None) -> None:
    """Spark, then the worker, the REST API and the connectors; blocks until ``stop`` is set
    (by SIGTERM/SIGINT when called from the main thread), then closes them in reverse order."""
    stop = stop or threading.Event()
    # A handler takes no lock (it may run inside stop.wait() holding the event's lock), and the
    # main thread wakes twice a second: a signal the kernel hands to another thread does not end a wait.
    requested: list[int] = []
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, frame: requested.append(signum))
    spark = _spark(master, spark_conf or {})
    from connect.rest import RestServer
    from connect.worker import Worker
    worker = rest = None
    try:
        worker = Worker(spark, worker_config).start()
        rest = RestServer(worker).start()
        for name, config, initial_state in connectors:
            if name in worker.connectors():      # configs live in the broker: a file read again replaces
                worker.put_connector_config(name, config)
                click.echo(f"connector {name} config replaced")
            else:
                worker.create_connector(name, config, initial_state)
                click.echo(f"connector {name} created")
        click.echo(f"Connect worker {worker.worker_id}: REST API at {rest.url}; "
                   f"{len(worker.connectors())} connector(s); SIGTERM or Ctrl-C stops it", err=True)
        sys.stderr.flush()
        while not requested and not stop.wait(0.5):
            pass
    finally:
        if rest is not None:
            rest.stop()
        if worker is not None:
            worker.close()
        spark.stop()


# A sink connector plans its converters and transforms in every batch; PySpark's DataFrame debugging
# records the call site of each column function with about five py4j calls, two thirds of that
# planning's calls. The worker's own session turns it off unless a --conf sets it. Connect's field
# names are case-sensitive (a struct may hold "id" and "ID"), and its transforms work in UTC.
_SPARK_DEFAULTS = {"spark.python.sql.dataFrameDebugging.enabled": "false", "spark.sql.caseSensitive": "true",
                   "spark.sql.session.timeZone": "UTC"}


def session_conf(conf: dict) -> dict:
    """The standalone worker's Spark configs: its defaults under the ones given with ``--conf``."""
    return {**_SPARK_DEFAULTS, **conf}


def _spark(master: str | None, conf: dict):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    builder = SparkSession.builder.appName("riverlog-connect")
    if master:
        builder = builder.master(master)
    for key, value in session_conf(conf).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    import spark_source
    spark_source.register(spark)
    return spark


# ---------------------------------------------------------------------------------- REST client
@connect.command("list")
@click.option("--expand", type=click.Choice(["status", "info"]), multiple=True,
              help="GET /connectors?expand=...: each connector's status and/or info, as JSON")
@_url_option
def list_(expand, url):
    """GET /connectors: the connectors' names, one a line."""
    query = "?" + "&".join(f"expand={e}" for e in expand) if expand else ""
    _, names = call(url, "GET", "/connectors" + query)
    if expand:
        _print(names)
    else:
        for name in names:
            click.echo(name)


@connect.command()
@click.argument("config_file", type=click.Path(exists=True, dir_okay=False))
@_url_option
def create(config_file, url):
    """POST /connectors: create the connector in a JSON or .properties file."""
    from connect.properties import connector_file
    name, config, initial_state = connector_file(config_file)
    _, info = call(url, "POST", "/connectors", {"name": name, "config": config, "initial_state": initial_state})
    _print(info)


def _getter(command: str, path: str, doc: str):
    @connect.command(command, help=doc)
    @click.argument("name")
    @_url_option
    def get(name, url):
        _print(call(url, "GET", path.format(_quoted(name)))[1])
    return get


for _cmd, _path, _doc in (("status", "/connectors/{}/status", "GET /connectors/NAME/status: state, tasks, trace, metrics."),
                          ("config", "/connectors/{}/config", "GET /connectors/NAME/config."),
                          ("tasks", "/connectors/{}/tasks", "GET /connectors/NAME/tasks: each task's config."),
                          ("offsets", "/connectors/{}/offsets", "GET /connectors/NAME/offsets: from the broker.")):
    _getter(_cmd, _path, _doc)


def _action(command: str, method: str, suffix: str, done: str, doc: str):
    @connect.command(command, help=doc)
    @click.argument("name")
    @_url_option
    def act(name, url):
        status, _ = call(url, method, f"/connectors/{_quoted(name)}{suffix}")
        click.echo(f"{done} {name} ({status})")
    return act


for _cmd, _method, _suffix, _done, _doc in (
        ("pause", "PUT", "/pause", "pausing", "PUT /connectors/NAME/pause: stop its query, keep its checkpoint."),
        ("resume", "PUT", "/resume", "resuming", "PUT /connectors/NAME/resume."),
        ("stop", "PUT", "/stop", "stopping", "PUT /connectors/NAME/stop: tasks gone; offsets may then be altered."),
        ("delete", "DELETE", "", "deleted", "DELETE /connectors/NAME.")):
    _action(_cmd, _method, _suffix, _done, _doc)
del _cmd, _path, _doc, _method, _suffix, _done


@connect.command()
@click.argument("name")
@click.option("--include-tasks", is_flag=True, help="restart the tasks too (answers with the status)")
@click.option("--only-failed", is_flag=True, help="only what is FAILED")
@_url_option
def restart(name, include_tasks, only_failed, url):
    """POST /connectors/NAME/restart."""
    query = f"?includeTasks={str(include_tasks).lower()}&onlyFailed={str(only_failed).lower()}"
    status, body = call(url, "POST", f"/connectors/{_quoted(name)}/restart{query}")
    if body is not None:
        _print(body)
    else:
        click.echo(f"restarted {name} ({status})")


@connect.command()
@click.option("--all", "everything", is_flag=True, help="converters, transforms and predicates too")
@_url_option
def plugins(everything, url):
    """GET /connector-plugins: class, type and version of each plugin."""
    _, found = call(url, "GET", f"/connector-plugins?connectorsOnly={str(not everything).lower()}")
    for p in found:
        click.echo(f"{p.get('type', ''):<16} {p.get('class', '')}  {p.get('version', '')}".rstrip())
