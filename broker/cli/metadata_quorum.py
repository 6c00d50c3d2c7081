"""``riverlog metadata-quorum describe --status``: the controller quorum as Kafka's
kafka-metadata-quorum.sh (``MetadataQuorumCommand``) prints it, for scripts that read it.

    ClusterId:              rl-4f2c...
    LeaderId:               1
    CurrentVoters:          [{"id": 1, "directoryId": null}, {"id": 2, "directoryId": null}]
    CurrentObservers:       [{"id": 4, "directoryId": null}]

Brokers report the cluster id, the active controller (the quorum's leader), the voters and the
broker-only nodes (Kafka's observers), so those are the lines printed, with Kafka's labels and
alignment; Kafka's ``LeaderEpoch``, ``HighWatermark``, ``MaxFollowerLag`` and
``MaxFollowerLagTimeMs`` lines, and ``describe --replication`` (each voter's log end offset), need
the quorum's replication state, which brokers do not report: ``--replication`` fails saying so.
``riverlog cluster status`` shows every node with its roles and state.
"""
from __future__ import annotations

import click

from broker.cli.common import ReportErrors, bootstrap_option, open_admin

__all__ = ["metadata_quorum", "status_lines"]


@click.group("metadata-quorum", cls=ReportErrors, params=[bootstrap_option()])
def metadata_quorum():
    """The controller quorum, as kafka-metadata-quorum (``--bootstrap-server`` before ``describe``
    too, where Kafka's tool takes it)."""


def _replicas(ids) -> str:
    """Kafka's ``printReplicaState``: ``[{"id": 1, "directoryId": null}, ...]`` (no directory ids
    and no controller endpoints are known here; Kafka leaves the endpoints out when it has none)."""
    return "[" + ", ".join(f'{{"id": {i}, "directoryId": null}}' for i in ids) + "]"


def status_lines(cluster_id: str, leader_id: int, voters: list[int], observers: list[int]) -> list[str]:
    """``handleDescribeStatus``'s lines that brokers can answer, labels padded to 24 characters."""
    return [f"{label + ':':<24}{value}" for label, value in (
        ("ClusterId", cluster_id), ("LeaderId", leader_id),
        ("CurrentVoters", _replicas(sorted(voters))), ("CurrentObservers", _replicas(sorted(observers))))]


@metadata_quorum.command("describe")
@click.option("--status", is_flag=True, help="a short summary of the quorum")
@click.option("--replication", is_flag=True, help="each voter's replication (not reported by Riverlog brokers)")
@click.option("--human-readable", is_flag=True, help="with --replication")
@click.pass_context
def describe(ctx, status, replication, human_readable):
    """The quorum's leader, voters and observers (--status)."""
    if status and replication:
        raise click.UsageError("Only one of --status or --replication should be specified with describe sub-command")
    if not status and not replication:
        raise click.UsageError("One of --status or --replication must be specified with describe sub-command")
    if status and human_readable:
        raise click.UsageError("The option --human-readable is only supported along with --replication")
    if replication:
        raise click.ClickException("describe --replication needs each voter's log end offset and fetch times, which "
                                   "Riverlog brokers do not report; use describe --status or riverlog cluster status")
    with open_admin(ctx) as admin:
        info = admin.describe_cluster(include_fenced_brokers=True, include_controllers=True).result()
    voters = [n.id for n in info.nodes if n.voter]
    observers = [n.id for n in info.nodes if n.broker and not n.voter]
    for line in status_lines(info.cluster_id, info.controller.id if info.controller else -1, voters, observers):
        click.echo(line)
