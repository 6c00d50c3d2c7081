"""``riverlog cluster``: run a local multi-node cluster for development, and show a cluster's state.

``cluster start --nodes 3`` starts three node processes (broker and controller each) on
consecutive ports of this machine, each with its own data directory under ``--data-dir``, and
stops them all on Ctrl-C or SIGTERM. Broker ports are ``base, base+2, ...`` and controller
ports ``base+1, base+3, ...`` (so the default first broker is on 9092, like Kafka's).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import click

from broker.cli.common import ReportErrors, open_admin
from broker.cli.params import DATA_DIR, LOG_LEVEL, PORT, POSITIVE


@click.group(cls=ReportErrors)
def cluster():
    """Run a local cluster; show cluster status."""


def node_layout(nodes: int, base_port: int, host: str = "127.0.0.1") -> tuple[list[tuple[int, int, int]], str]:
    """[(node id, broker port, controller port)] and the controller.quorum.voters string."""
    layout = [(i + 1, base_port + 2 * i, base_port + 2 * i + 1) for i in range(nodes)]
    voters = ",".join(f"{node}@{host}:{cport}" for node, _, cport in layout)
    return layout, voters


@cluster.command("start")
@click.option("--nodes", type=POSITIVE, default=3, show_default=True)
@click.option("--data-dir", type=DATA_DIR, required=True, help="one sub-directory per node is created here")
@click.option("--base-port", type=PORT, default=9092, show_default=True)
@click.option("--config", "-c", "overrides", multiple=True, help="key=value config for every node")
@click.option("--log-level", type=LOG_LEVEL, default="WARNING", show_default=True)
def cluster_start(nodes, data_dir, base_port, overrides, log_level):
    """Start NODES broker+controller processes in the foreground; Ctrl-C stops them all."""
    if base_port == 0 or base_port + 2 * nodes - 1 > 65535:
        raise click.BadParameter(f"{nodes} node(s) need ports {base_port} to {base_port + 2 * nodes - 1}; "
                                 "use a base port from 1 to " f"{65536 - 2 * nodes}", param_hint="'--base-port'")
    layout, voters = node_layout(nodes, base_port)
    procs = []
    for node, port, _ in layout:
        cmd = [sys.executable, "-m", "broker", "broker", "start", "--node-id", str(node), "--port", str(port),
               "--data-dir", os.path.join(data_dir, f"node-{node}"), "--controller-quorum", voters,
               "--log-level", log_level]
        for item in overrides:
            cmd += ["--config", item]
        procs.append(subprocess.Popen(cmd))
    bootstrap = ",".join(f"127.0.0.1:{port}" for _, port, _ in layout)
    click.echo(f"Riverlog cluster of {nodes} node(s); bootstrap servers: {bootstrap}")
    click.echo(f"controller.quorum.voters={voters}")
    sys.stdout.flush()
    stopping = []

    def stop(signum, frame):
        stopping.append(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while not stopping and all(p.poll() is None for p in procs):
        time.sleep(0.2)
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
    failed = [p.returncode for p in procs if p.returncode not in (0, -signal.SIGTERM)]
    sys.exit(1 if failed and not stopping else 0)


@cluster.command("status")
@click.pass_context
def cluster_status(ctx):
    """Nodes and their roles, the active controller, and under-replicated or offline partitions."""
    with open_admin(ctx) as admin:
        info = admin.describe_cluster().result()
        md = admin.list_topics()
    click.echo(f"ClusterId: {info.cluster_id}\tController: {info.controller.id if info.controller else 'none'}"
               f"\tMetadataOffset: {info.metadata_offset}")
    for n in sorted(info.nodes, key=lambda n: n.id):
        state = "fenced" if n.fenced else ("active" if n.broker else "-")
        leader = "\tControllerLeader" if info.controller and n.id == info.controller.id else ""
        click.echo(f"\tNode: {n.id}\tAddress: {n.host}:{n.port}\tRoles: {n.roles}\tState: {state}{leader}")
    under, offline = [], []
    for name, topic in sorted(md.topics.items()):
        for p in sorted(topic.partitions.values(), key=lambda p: p.partition):
            if p.leader < 0:
                offline.append(f"{name}-{p.partition}")
            elif len(p.isr) < len(p.replicas):
                under.append(f"{name}-{p.partition} (isr {','.join(map(str, p.isr))} of "
                             f"{','.join(map(str, p.replicas))})")
    click.echo(f"UnderReplicatedPartitions: {len(under)}")
    for line in under:
        click.echo(f"\t{line}")
    click.echo(f"OfflinePartitions: {len(offline)}")
    for line in offline:
        click.echo(f"\t{line}")
