"""``riverlog broker start``: run one node (broker, controller or both) in the foreground.

    riverlog broker start --data-dir /tmp/rl --port 9092 --config log.segment.bytes=1048576

Every value, from options, ``--config`` or ``--properties``, gets the checks of
:mod:`broker.cli.params` before the server is built, and the listeners are tried first, so a bad
value or a port in use is one ``Error:`` line, not a traceback.
"""
from __future__ import annotations

import faulthandler
import logging
import signal
import sys

import click

from broker.cli.common import ReportErrors, pairs
from broker.cli.params import (DATA_DIR, LOG_LEVEL, NODE_ID, PORT, QUORUM, check_broker_values,
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
def broker_start(data_dir, host, port, node_id, roles, controller_quorum, properties_file, overrides, log_level):
    """Start a node in the foreground; SIGTERM or Ctrl-C stops it cleanly (leadership moves first)."""
    from broker.config import BROKER_CONFIG, read_properties
    from broker.server.listeners import with_client_address
    from broker.server.service import BrokerServer

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    values = read_properties(properties_file) if properties_file else {}
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
