"""``riverlog broker start``: run one node (broker, controller or both) in the foreground.

    riverlog broker start --data-dir /tmp/rl --port 9092 --config log.segment.bytes=1048576

Every value, from options, ``--config`` or ``--properties``, gets the checks of
:mod:`broker.cli.params` before the server is built, and the listeners are tried first, so a bad
value or a port in use is one ``Error:`` line, not a traceback.

The node prints ``... listening on HOST:PORT`` when its sockets are open and ``... ready: serving
clients on HOST:PORT`` once it has caught up, registered and been unfenced (until then it answers
clients ``BrokerNotAvailable``, which they retry). ``--wait`` is the form for scripts: the node runs
in the background (output in ``<data-dir>/riverlog.log``) and the command returns once it is ready:

    riverlog broker start --data-dir /tmp/rl --wait && riverlog topics create orders
"""
from __future__ import annotations

import faulthandler
import logging
import os
import signal
import subprocess
import sys
import threading
import time

import click

from broker.cli.common import ReportErrors, pairs
from broker.cli.params import (DATA_DIR, LOG_LEVEL, NODE_ID, PORT, POSITIVE, QUORUM, check_broker_values,
                               check_listener_free)


@click.group(cls=ReportErrors)
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
@click.option("--wait", is_flag=True,
              help="run the node in the background and return once it is ready (for scripts)")
@click.option("--wait-timeout", type=POSITIVE, default=60, show_default=True, help="seconds --wait waits")
def broker_start(data_dir, host, port, node_id, roles, controller_quorum, properties_file, overrides, log_level,
                 wait, wait_timeout):
    """Start a node in the foreground; SIGTERM or Ctrl-C stops it cleanly (leadership moves first)."""
    if wait:
        args = [("--data-dir", data_dir), ("--host", host), ("--port", port), ("--node-id", node_id),
                ("--roles", roles), ("--controller-quorum", controller_quorum),
                ("--properties", properties_file), ("--log-level", log_level)]
        cmd = [sys.executable, "-m", "broker", "broker", "start"]
        cmd += [str(v) for name, value in args if value is not None for v in (name, value)]
        cmd += [v for item in overrides for v in ("--config", item)]
        log_file = os.path.join(data_dir or "./riverlog-data", "riverlog.log")
        proc, start = spawn_detached(cmd, log_file)
        line = await_ready(proc, log_file, start, time.monotonic() + wait_timeout)
        click.echo(f"{line} (pid {proc.pid}; output in {log_file})")
        return
    from broker.config import BROKER_CONFIG, read_properties
    from broker.server.listeners import with_client_address
    from broker.server.service import BrokerServer

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        values = read_properties(properties_file) if properties_file else {}
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="'--properties'") from None
    values.update(pairs(overrides, "--config"))
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
    # Set before the node starts, so that a signal during its start is not lost. The handlers only
    # record the request: they run on the main thread between two bytecodes, maybe inside
    # Event.wait() holding that event's lock, so they must take no lock. The main thread wakes twice
    # a second, since a signal the kernel hands to another thread (gRPC's) does not end its wait.
    requested: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, frame: requested.append(signum))
    signal.signal(signal.SIGINT, lambda signum, frame: requested.append(signum))
    # ``kill -USR1 PID`` prints every thread's stack, without stopping the node (jstack's use).
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    # A node alone is its own quorum and is ready within a moment; in a quorum it waits for peers.
    server = BrokerServer(config).start(wait_ready=0 if config["controller.quorum.voters"] else 30)
    click.echo(f"Riverlog node {server.broker.node_id} ({server.config['process.roles']}) listening on "
               f"{server.bootstrap_servers}", err=False)
    if server.inter_broker_port is not None:
        click.echo(f"Riverlog node {server.broker.node_id} inter-broker listener on "
                   f"{server.host}:{server.inter_broker_port}")
    sys.stdout.flush()

    def announce_ready():
        while not server._stopped.is_set():
            if server.broker.wait_until_ready(0.5):
                click.echo(f"Riverlog node {server.broker.node_id} {READY} {server.bootstrap_servers}")
                sys.stdout.flush()
                return

    threading.Thread(target=announce_ready, name="riverlog-ready", daemon=True).start()

    while not requested and not server._stopped.wait(0.5):
        pass
    # A stop that hangs past the controlled-shutdown bound prints every thread's stack to stderr.
    faulthandler.dump_traceback_later(config["controlled.shutdown.timeout.ms"] / 1000.0 + 10.0)
    server._stopped.clear()
    server.stop()
    faulthandler.cancel_dump_traceback_later()


READY = "ready: serving clients on"


def spawn_detached(cmd: list[str], log_file: str) -> tuple[subprocess.Popen, int]:
    """Run ``cmd`` (a node) in its own session, so it outlives this command, with its output
    appended to ``log_file``; returns the process and where its output starts in the file."""
    os.makedirs(os.path.dirname(os.path.abspath(log_file)), exist_ok=True)
    with open(log_file, "ab") as out:
        start = out.tell()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    return proc, start


def await_ready(proc: subprocess.Popen, log_file: str, start: int, deadline: float) -> str:
    """The node's ready line, once it prints one; a node that exits or is not ready by ``deadline``
    (``time.monotonic()``) is stopped and the end of its output is the error."""
    while True:
        with open(log_file, "rb") as f:
            f.seek(start)
            text = f.read().decode(errors="replace")
        ready = [line for line in text.splitlines() if READY in line]
        if ready:
            return ready[0]
        if proc.poll() is not None or time.monotonic() >= deadline:
            if proc.poll() is None:
                proc.terminate()
            tail = "\n".join(text.splitlines()[-5:])
            raise click.ClickException(f"node (pid {proc.pid}) was not ready in time; the end of {log_file}:\n{tail}")
        time.sleep(0.1)


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
