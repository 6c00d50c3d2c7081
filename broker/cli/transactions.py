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
import time

import click

from broker.cli.common import ReportErrors, open_admin, partitions_of, table
from broker.cli.hanging_transactions import HEADERS, candidates, hanging_rows
from broker.cli.params import COUNT, NODE_ID, PARTITION
from broker.errors import TransactionalIdNotFoundError


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
@click.argument("transactional_ids", nargs=-1)
@click.option("--transactional-id", "id_options", multiple=True, help="as Kafka's kafka-transactions (or as arguments)")
@click.pass_context
def transactions_describe(ctx, transactional_ids, id_options):
    """State, producer id and epoch, timeout, start time, partitions and groups of each transactional.id."""
    transactional_ids = tuple(dict.fromkeys(transactional_ids + id_options))
    if not transactional_ids:
        raise click.UsageError("Missing the transactional.id: give TRANSACTIONAL_ID... or --transactional-id")
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


@transactions.command("find-hanging")
@click.option("--topic", "-t", default=None, help="search this topic (or every topic, with --broker-id)")
@click.option("--partition", "-p", type=PARTITION, default=None, help="with --topic: only this partition")
@click.option("--broker-id", type=NODE_ID, default=None, help="only partitions with a replica on this broker")
@click.option("--max-transaction-timeout", type=COUNT, default=15, show_default=True,
              help="minutes: an open transaction idle longer than this is a candidate (transaction.max.timeout.ms)")
@click.pass_context
def transactions_find_hanging(ctx, topic, partition, broker_id, max_transaction_timeout):
    """Open transactions no coordinator will end (kafka-transactions find-hanging): each holds its
    partition's last stable offset back."""
    from broker.client import TopicPartition
    if topic is None and broker_id is None:
        raise click.UsageError("The `find-hanging` command requires either --topic or --broker-id to limit the scope "
                               "of the search")
    if partition is not None and topic is None:
        raise click.UsageError("The --partition argument requires --topic to be provided")
    with open_admin(ctx) as admin:
        md = admin.list_topics() if topic is None else admin.list_topics(topic)
        if topic is not None and (topic not in md.topics or md.topics[topic].error is not None):
            partitions_of(admin, topic)                 # raises the topic's error
        wanted = [TopicPartition(name, p.partition) for name, t in sorted(md.topics.items()) if t.error is None
                  for p in sorted(t.partitions.values(), key=lambda p: p.partition)
                  if (partition is None or p.partition == partition)
                  and (broker_id is None or broker_id in p.replicas)]
        futures = admin.describe_producers(wanted) if wanted else {}
        producers = {(tp.topic, tp.partition): f.result() for tp, f in futures.items()}
        now_ms = int(time.time() * 1000)
        found = candidates(producers, now_ms, max_transaction_timeout * 60_000)
        ids, descriptions = {}, {}
        if found:
            pids = {a.producer_id for _, _, a in found}
            ids = {t.producer_id: t.transactional_id for t in admin.list_transactions().result() if t.producer_id in pids}
            for txn_id, future in admin.describe_transactions(sorted(set(ids.values()))).items() if ids else ():
                try:
                    descriptions[txn_id] = future.result()
                except TransactionalIdNotFoundError:
                    descriptions[txn_id] = None
    table([HEADERS] + hanging_rows(found, ids, descriptions, now_ms))
