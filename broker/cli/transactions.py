"""``riverlog transactions``: list and describe transactions, find and abort hanging ones.

    riverlog transactions list                       # TRANSACTIONAL-ID PRODUCER-ID STATE COORDINATOR
    riverlog transactions describe billing-app-1
    riverlog transactions describe-producers --topic invoices --partition 0
    riverlog transactions abort --transactional-id billing-app-1

A transaction left open by a producer that is gone holds its partitions' last stable offset back
until ``transaction.timeout.ms`` passes: ``read_committed`` consumers stall there.
``describe-producers`` shows which producer holds each partition (the first open transaction
listed), and ``abort`` ends it now (as Kafka's kafka-transactions.sh abort); the producer that
opened it is fenced.
"""
from __future__ import annotations

import datetime as dt

import click

from broker.cli.common import ReportErrors, open_admin, partitions_of, table
from broker.cli.params import PARTITION


@click.group(cls=ReportErrors)
def transactions():
    """Transactions: list, describe, find what holds a partition back, abort."""


def _when(ms: int) -> str:
    if ms is None or ms < 0:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(timespec="milliseconds")


@transactions.command("list")
@click.pass_context
def transactions_list(ctx):
    """Every transactional.id the coordinators know, with its state."""
    with open_admin(ctx) as admin:
        listed = admin.list_transactions().result()
    rows = [["TRANSACTIONAL-ID", "PRODUCER-ID", "STATE", "COORDINATOR"]]
    rows += [[t.transactional_id, str(t.producer_id), t.state, str(t.coordinator)] for t in listed]
    table(rows)


@transactions.command("describe")
@click.argument("transactional_ids", nargs=-1, required=True)
@click.pass_context
def transactions_describe(ctx, transactional_ids):
    """State, producer id and epoch, timeout, start time, partitions and groups of each transactional.id."""
    with open_admin(ctx) as admin:
        futures = admin.describe_transactions(list(transactional_ids))
        for i, txn_id in enumerate(transactional_ids):
            d = futures[txn_id].result()
            if i:
                click.echo()
            parts = ",".join(f"{tp.topic}:{tp.partition}"
                             for tp in sorted(d.topic_partitions, key=lambda t: (t.topic, t.partition)))
            for name, value in (("TransactionalId", d.transactional_id), ("State", d.state),
                                ("ProducerId", d.producer_id), ("ProducerEpoch", d.producer_epoch),
                                ("TimeoutMs", d.timeout_ms), ("StartTime", _when(d.start_ms)),
                                ("Partitions", parts or "-"), ("Groups", ",".join(d.groups) or "-"),
                                ("Coordinator", d.coordinator)):
                click.echo(f"{name}: {value}")


@transactions.command("abort")
@click.option("--transactional-id", "transactional_id", required=True, help="the transaction's transactional.id")
@click.pass_context
def transactions_abort(ctx, transactional_id):
    """Abort the open transaction of a transactional.id; its producer is fenced (the epoch is bumped)."""
    with open_admin(ctx) as admin:
        producer_id, epoch = admin.abort_transaction(transactional_id).result()
    click.echo(f"Aborted the transaction of {transactional_id}: producer id {producer_id} is now at epoch {epoch}.")


@transactions.command("describe-producers")
@click.option("--topic", "-t", required=True)
@click.option("--partition", "-p", "partitions", type=PARTITION, multiple=True, help="default: every partition")
@click.option("--all", "verbose", is_flag=True,
              help="also every producer the partition remembers (idle ones go after producer.id.expiration.ms)")
@click.pass_context
def transactions_describe_producers(ctx, topic, partitions, verbose):
    """Per partition: the last stable offset, the high watermark and each open transaction, oldest first
    (the first is what holds the last stable offset back); with --all, every producer remembered."""
    from broker.client import TopicPartition
    with open_admin(ctx) as admin:
        if not partitions:
            partitions = partitions_of(admin, topic)
        futures = admin.describe_producers([TopicPartition(topic, p) for p in partitions])
        results = [(tp.partition, f.result()) for tp, f in sorted(futures.items(), key=lambda kv: kv[0].partition)]
    for i, (partition, r) in enumerate(results):
        if i:
            click.echo()
        table([["TOPIC", "PARTITION", "LAST-STABLE-OFFSET", "HIGH-WATERMARK"],
                [topic, str(partition), str(r.last_stable_offset), str(r.high_watermark)]])
        if r.open_transactions:
            table([["PRODUCER-ID", "EPOCH", "FIRST-OFFSET", "STARTED"]] +
                   [[str(o.producer_id), str(o.producer_epoch), str(o.first_offset), _when(o.start_ms)]
                    for o in r.open_transactions])
        else:
            click.echo("(no open transactions)")
        if verbose:
            table([["ACTIVE-PRODUCER-ID", "EPOCH", "LAST-SEQUENCE", "LAST-WRITE", "TXN-START-OFFSET"]] +
                   [[str(a.producer_id), str(a.producer_epoch), str(a.last_sequence), _when(a.last_timestamp),
                     str(a.current_txn_start_offset)] for a in r.active_producers])
