"""``riverlog cluster``: run a local multi-node cluster for development, and show a cluster's state.

``cluster start --nodes 3`` starts three node processes (broker and controller each) on
consecutive ports of this machine, each with its own data directory under ``--data-dir``, and
stops them all on Ctrl-C or SIGTERM. Broker ports are ``base, base+2, ...`` and controller
ports ``base+1, base+3, ...`` (so the default first broker is on 9092, like Kafka's). It prints
``Riverlog cluster ready: ...`` once every node is ready (caught up, registered, unfenced);
``--wait`` runs the nodes in the background (output in each node's directory) and returns then:

    riverlog cluster start --nodes 3 --data-dir /tmp/rl --wait && riverlog topics create orders -r 3
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import click

from broker.cli.broker_cmd import READY, await_ready, spawn_detached
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
@click.option("--wait", is_flag=True,
              help="run the nodes in the background and return once all are ready (for scripts)")
@click.option("--wait-timeout", type=POSITIVE, default=120, show_default=True, help="seconds --wait waits")
def cluster_start(nodes, data_dir, base_port, overrides, log_level, wait, wait_timeout):
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
        if wait:
            log_file = os.path.join(data_dir, f"node-{node}", "riverlog.log")
            procs.append((*spawn_detached(cmd, log_file), log_file))
        else:
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True))
    bootstrap = ",".join(f"127.0.0.1:{port}" for _, port, _ in layout)
    ready_line = f"Riverlog cluster ready: {nodes} node(s) serving clients; bootstrap servers: {bootstrap}"
    if wait:
        deadline = time.monotonic() + wait_timeout
        try:
            for proc, start, log_file in procs:
                await_ready(proc, log_file, start, deadline)
        except click.ClickException:
            for proc, _, _ in procs:
                if proc.poll() is None:
                    proc.terminate()
            raise
        click.echo(ready_line)
        click.echo(f"pids: {' '.join(str(p.pid) for p, _, _ in procs)}; stop them with SIGTERM")
        return
    click.echo(f"Riverlog cluster of {nodes} node(s); bootstrap servers: {bootstrap}")
    click.echo(f"controller.quorum.voters={voters}")
    sys.stdout.flush()
    _relay_until_ready(procs, ready_line)
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


def _relay_until_ready(procs: list[subprocess.Popen], ready_line: str) -> None:
    """Echo every node's output, and the cluster's ready line once every node has printed its own."""
    ready: set[int] = set()
    lock = threading.Lock()

    def relay(proc):
        for line in proc.stdout:
            click.echo(line, nl=False)
            if READY in line:
                with lock:
                    ready.add(proc.pid)
                    if len(ready) == len(procs):
                        click.echo(ready_line)
            sys.stdout.flush()

    for proc in procs:
        threading.Thread(target=relay, args=(proc,), daemon=True).start()


@cluster.command("status")
@click.pass_context
def cluster_status(ctx):
    """Nodes and their roles, the active controller, and under-replicated or offline partitions."""
    with open_admin(ctx) as admin:
        info = admin.describe_cluster(include_fenced_brokers=True, include_controllers=True).result()
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
