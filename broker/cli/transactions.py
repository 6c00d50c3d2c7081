"""``riverlog transactions``: list and describe transactions, find and abort hanging ones.

    riverlog transactions list                       # TransactionalId Coordinator ProducerId TransactionState
    riverlog transactions describe --transactional-id billing-app-1   # kafka-transactions describe's table
    riverlog transactions describe-producers --topic invoices --partition 0
    riverlog transactions abort --transactional-id billing-app-1
    riverlog transactions abort --topic invoices --partition 0 --start-offset 4001   # as kafka-transactions

A transaction left open by a producer that is gone holds its partitions' last stable offset back
until ``transaction.timeout.ms`` passes: ``read_committed`` consumers stall there.
``describe-producers`` shows which producer holds each partition (the first open transaction
listed), and ``abort`` ends it now (as Kafka's kafka-transactions.sh abort): through its
coordinator when one holds it, else (a hanging transaction, what ``find-hanging`` lists) with an
abort marker written at the partition.
"""
from __future__ import annotations

import datetime as dt
import time

import click

from broker.cli.common import ReportErrors, open_admin, partitions_of, pretty_table, table
from broker.cli.hanging_transactions import HEADERS, candidates, coordinator_holds, hanging_rows, open_at, spec_text
from broker.cli.params import COUNT, EPOCH, NODE_ID, OFFSET, PARTITION
from broker.errors import RiverlogError, TransactionalIdNotFoundError

COORDINATOR_EPOCH = click.IntRange(-(2**31), 2**31 - 1)   # Kafka's int32


@click.group(cls=ReportErrors)
def transactions():
    """Transactions: list, describe, find what holds a partition back, abort."""


def _when(ms: int) -> str:
    if ms is None or ms < 0:
        return "-"
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(timespec="milliseconds")


@transactions.command("list")
@click.option("--duration-filter", type=OFFSET, default=None,
              help="ms: only transactions running longer than this (all if < 0), as kafka-transactions list")
@click.pass_context
def transactions_list(ctx, duration_filter):
    """Every transactional.id the coordinators know, with its state (kafka-transactions list's table)."""
    with open_admin(ctx) as admin:
        listed = admin.list_transactions().result()
        if duration_filter is not None and duration_filter >= 0 and listed:
            # Kafka's coordinator filter (TransactionStateManager.listTransactionStates): now minus the
            # transaction's start time must exceed it; a transactional.id gone meanwhile is left out
            started = {}
            for txn_id, future in admin.describe_transactions([t.transactional_id for t in listed]).items():
                try:
                    started[txn_id] = future.result().start_ms
                except TransactionalIdNotFoundError:
                    pass
            now_ms = int(time.time() * 1000)
            listed = [t for t in listed if t.transactional_id in started
                      and now_ms - started[t.transactional_id] > duration_filter]
    pretty_table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
                 [[t.transactional_id, str(t.coordinator), str(t.producer_id), t.state] for t in listed])


@transactions.command("describe")
@click.argument("transactional_ids", nargs=-1)
@click.option("--transactional-id", "id_options", multiple=True, help="as Kafka's kafka-transactions (or as arguments)")
@click.pass_context
def transactions_describe(ctx, transactional_ids, id_options):
    """Coordinator, producer id and epoch, state, timeout, start time and partitions of each
    transactional.id: kafka-transactions describe's table, a row per transactional.id."""
    transactional_ids = tuple(dict.fromkeys(transactional_ids + id_options))
    if not transactional_ids:
        raise click.UsageError("Missing the transactional.id: give TRANSACTIONAL_ID... or --transactional-id")
    rows = []
    with open_admin(ctx) as admin:
        futures = admin.describe_transactions(list(transactional_ids))
        for txn_id in transactional_ids:
            d = futures[txn_id].result()
            now_ms = int(time.time() * 1000)
            started = d.start_ms is not None and d.start_ms >= 0
            parts = ",".join(f"{tp.topic}-{tp.partition}"
                             for tp in sorted(d.topic_partitions, key=lambda t: (t.topic, t.partition)))
            rows.append([str(d.coordinator), d.transactional_id, str(d.producer_id), str(d.producer_epoch), d.state,
                         str(d.timeout_ms), str(d.start_ms) if started else "None",
                         str(now_ms - d.start_ms) if started else "None", parts])
    pretty_table(["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                  "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs", "TopicPartitions"],
                 rows)


@transactions.command("abort")
@click.option("--transactional-id", "transactional_id", default=None,
              help="abort whatever this transactional.id has open; its producer is fenced")
@click.option("--topic", "-t", default=None, help="as kafka-transactions abort: the partition's topic")
@click.option("--partition", "-p", type=PARTITION, default=None, help="with --topic: the partition")
@click.option("--start-offset", type=OFFSET, default=None, help="the first offset of the transaction to abort")
@click.option("--producer-id", type=OFFSET, default=None, help="instead of --start-offset: the producer id")
@click.option("--producer-epoch", type=EPOCH, default=None, help="with --producer-id")
@click.option("--coordinator-epoch", type=COORDINATOR_EPOCH, default=None,
              help="with --producer-id; negative (find-hanging's -1): the producer's last one on the partition")
@click.pass_context
def transactions_abort(ctx, transactional_id, topic, partition, start_offset, producer_id, producer_epoch,
                       coordinator_epoch):
    """Abort an open transaction: by --transactional-id (its producer is fenced: the epoch is bumped),
    or as kafka-transactions abort by --topic, --partition and --start-offset (or --producer-id,
    --producer-epoch and --coordinator-epoch), exactly that transaction, printing nothing: through
    its coordinator when one holds it on that partition, else (hanging) by an abort marker there."""
    if transactional_id is not None:
        if topic is not None or partition is not None:
            raise click.UsageError("give --transactional-id, or --topic and --partition, not both")
        with open_admin(ctx) as admin:
            producer_id, epoch = admin.abort_transaction(transactional_id).result()
        click.echo(f"Aborted the transaction of {transactional_id}: producer id {producer_id} is now at epoch {epoch}.")
        return
    for name, value in (("--topic", topic), ("--partition", partition)):
        if value is None:
            raise click.UsageError(f"Missing option '{name}' (or give --transactional-id)")
    if start_offset is None and producer_id is None:
        _fail("The transaction to abort must be identified either with --start-offset (for brokers on 3.0 or "
              "above) or with --producer-id, --producer-epoch, and --coordinator-epoch (for older brokers)")
    if start_offset is None:
        for name, value in (("--producer-epoch", producer_epoch), ("--coordinator-epoch", coordinator_epoch)):
            if value is None:
                _fail(f"Missing required argument {name}")
    from broker.client import TopicPartition
    from broker.client.admin_abort import AbortTransactionSpec
    from broker.client.txn_admin import TransactionHandle
    tp = TopicPartition(topic, partition)
    with open_admin(ctx) as admin:
        if start_offset is not None:
            found = open_at(admin.describe_producers([tp])[tp].result(), start_offset)
            if found is None:
                _fail(f"Could not find any open transactions starting at offset {start_offset} on partition "
                      f"{topic}-{partition}")
            # partitions do not report the coordinator epoch: -1 is the producer's last one there
            producer_id, producer_epoch, coordinator_epoch = found.producer_id, found.producer_epoch, -1
        try:
            listed = admin.list_transactions().result()
        except RiverlogError as e:
            # a coordinator that does not answer may hold this transaction: aborting it at this
            # partition alone would break its atomicity, so nothing is aborted
            _fail(f"Failed to list transactions to find whether a coordinator holds producer id {producer_id}'s "
                  f"transaction (nothing was aborted): {e.name}: {e.message}")
        txn_id = next((t.transactional_id for t in listed if t.producer_id == producer_id), None)
        held = None
        if txn_id is not None:
            try:
                held = admin.describe_transactions([txn_id])[txn_id].result()
            except TransactionalIdNotFoundError:
                pass
        if coordinator_holds(held, producer_id, topic, partition):
            # its coordinator ends it: markers reach every partition of the transaction, which stays atomic
            admin.abort_transactions([TransactionHandle(txn_id, producer_id, producer_epoch)])[txn_id].result()
            return
        # hanging: no coordinator will write its marker here, so write the abort marker at the partition
        try:
            admin.abort_transaction(AbortTransactionSpec(tp, producer_id, producer_epoch, coordinator_epoch)).result()
        except RiverlogError as e:
            spec = spec_text(topic, partition, producer_id, producer_epoch, coordinator_epoch)
            _fail(f"Failed to abort transaction {spec}: {e.name}: {e.message}")


def _fail(message: str):
    """Kafka's ``printErrorAndExit``: the message on standard error, exit status 1."""
    raise click.ClickException(message)


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
            try:
                listed = admin.list_transactions().result()
            except RiverlogError as e:
                # as kafka-transactions: a coordinator missing from the listing could hold any of them
                _fail(f"Failed to list transactions for {len(pids)} producers: {e.name}: {e.message}")
            ids = {t.producer_id: t.transactional_id for t in listed if t.producer_id in pids}
            for txn_id, future in admin.describe_transactions(sorted(set(ids.values()))).items() if ids else ():
                try:
                    descriptions[txn_id] = future.result()
                except TransactionalIdNotFoundError:
                    descriptions[txn_id] = None
    pretty_table(HEADERS, hanging_rows(found, ids, descriptions, now_ms))
