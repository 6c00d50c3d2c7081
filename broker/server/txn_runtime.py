"""Transaction coordination on this broker: the ``__transaction_state`` partitions it leads (see
:mod:`broker.server.coordinator_runtime`), and the markers that end transactions.

Ending a transaction: the decision (``PrepareCommit``/``PrepareAbort``) is written first; then a
marker goes to every partition of the transaction (through its leader's WriteTxnMarkers, acks=all)
and to every group with offsets in it; then ``Complete…`` is written. If markers cannot all be
written now, the transaction stays prepared and the coordinator's timer finishes it — also after a
failover, since the new coordinator replays the prepared state. The same timer aborts
transactions open longer than their ``transaction.timeout.ms``, bumping the epoch so the producer
that opened them is fenced, and every
``transaction.remove.expired.transaction.cleanup.interval.ms`` forgets transactional ids idle for
``transactional.id.expiration.ms``.

Every marker carries the coordinator epoch: the leader epoch of the ``__transaction_state``
partition the shard was loaded from (Kafka's ``TransactionStateManager`` loads a partition with
its leader epoch as ``coordinatorEpoch``). A partition that already holds a marker of a newer
coordinator for the producer answers ``TransactionCoordinatorFenced``: this broker was deposed
(its view of the partition's leadership is stale), so, as Kafka's
``TransactionMarkerRequestCompletionHandler``, it stops sending markers: the shard is dropped and
requests get ``NotCoordinator`` until the broker loads the partition again.
"""
from __future__ import annotations

import logging
from collections import defaultdict

import grpc

from broker.client.cluster import translate_rpc_error
from broker.errors import (ConcurrentTransactionsError, NotCoordinatorError, NotLeaderOrFollowerError, RiverlogError,
                           TransactionCoordinatorFencedError, UnknownTopicOrPartitionError, error_for_code)
from broker.proto import riverlog_pb2 as pb
from broker.proto.partitions import grouped
from broker.server.coordinator_runtime import CoordinatorRuntime
from broker.transaction.coordinator import MAX_EPOCH, TXN_TOPIC, TransactionMetadata, TransactionShard

log = logging.getLogger(__name__)


class TransactionRuntime(CoordinatorRuntime):
    topic = TXN_TOPIC
    what = "transactional.id"
    thread_name = "riverlog-transactions"

    def __init__(self, broker, groups):
        super().__init__(broker)
        self.groups = groups  # this broker's GroupRuntime, for markers of groups it coordinates
        self._next_expiry: dict[int, int] = {}  # per shard: when idle transactional ids are next looked for

    def new_shard(self, partition: int) -> TransactionShard:
        return TransactionShard(partition, self.config["transaction.max.timeout.ms"],
                                self.config["transactional.id.expiration.ms"])

    def topic_settings(self) -> dict:
        return {"num_partitions": self.config["transaction.state.log.num.partitions"],
                "replication_factor": self.config["transaction.state.log.replication.factor"],
                "configs": {"cleanup.policy": "compact",
                            "segment.bytes": str(self.config["transaction.state.log.segment.bytes"]),
                            # Kafka's TransactionStateManager.transactionTopicConfigs
                            "min.insync.replicas": str(self.config["transaction.state.log.min.isr"])}}

    # ------------------------------------------------------------------------------ requests
    def init_producer_id(self, txn_id: str, timeout_ms: int,
                         expected: tuple[int, int] | None = None) -> tuple[int, int]:
        """A new instance's epoch (``expected`` None), or a producer's own next epoch (KIP-360).
        An open transaction is aborted first, under its own producer id; if that fence took the
        id's last epoch, the shard is asked once more and hands out a new producer id."""
        now = self.broker.clock.time_ms()
        with self.locked(txn_id) as loaded:
            meta, records, abort_first = loaded.shard.init_producer_id(
                txn_id, timeout_ms, now, self.broker.producer_ids.next_id, expected)
            if records:
                self.write(loaded, records)
            if abort_first:
                self._finish(loaded, meta)
                if meta.producer_epoch > MAX_EPOCH:
                    meta, records, _ = loaded.shard.init_producer_id(
                        txn_id, timeout_ms, self.broker.clock.time_ms(), self.broker.producer_ids.next_id, expected)
                    if records:
                        self.write(loaded, records)
            return meta.producer_id, meta.producer_epoch

    def end(self, txn_id: str, producer_id: int, epoch: int, commit: bool) -> None:
        now = self.broker.clock.time_ms()
        with self.locked(txn_id) as loaded:
            meta, records, markers = loaded.shard.end(txn_id, producer_id, epoch, commit, now)
            if records:
                self.write(loaded, records)
            if markers:
                self._finish(loaded, meta)

    def abort(self, txn_id: str) -> tuple[int, int]:
        """An operator's abort of a hanging transaction (fences its producer)."""
        now = self.broker.clock.time_ms()
        with self.locked(txn_id) as loaded:
            meta, records = loaded.shard.abort(txn_id, now)
            if records:
                self.write(loaded, records)
            self._finish(loaded, meta)
            return meta.producer_id, meta.producer_epoch

    # ------------------------------------------------------------------------------ markers
    def _finish(self, loaded, meta: TransactionMetadata) -> None:
        """Markers everywhere, then Complete; on failure the transaction stays prepared (retried by
        the timer) and the caller hears ConcurrentTransactions; NotCoordinator once a newer
        coordinator fenced this one."""
        try:
            self._write_markers(loaded, meta)
        except TransactionCoordinatorFencedError as e:
            self._fenced(loaded, meta, e)
            raise NotCoordinatorError(f"broker {self.broker.node_id} is no longer the coordinator of "
                                      f"transactional.id '{meta.transactional_id}': {e}") from None
        except RiverlogError as e:
            log.info("transaction '%s': markers not all written yet (%r); retrying later", meta.transactional_id, e)
            raise ConcurrentTransactionsError(
                f"transactional.id '{meta.transactional_id}' is still completing: {e}") from None
        self.write(loaded, loaded.shard.complete(meta.transactional_id, self.broker.clock.time_ms()))

    def _fenced(self, loaded, meta: TransactionMetadata, error: RiverlogError) -> None:
        log.warning("transaction '%s': a newer coordinator of %s-%d took over (%s); stop coordinating it",
                    meta.transactional_id, self.topic, loaded.shard.partition, error)
        self._drop(loaded.shard.partition, loaded)

    def _write_markers(self, loaded, meta: TransactionMetadata) -> None:
        """A marker to every partition and group of the transaction still without one, one request
        per leader, each tried even when another fails (Kafka's ``TransactionMarkerChannelManager``).
        Those that took theirs leave the transaction's pending sets (in memory, as Kafka's
        ``removePartition``), so a retry writes no second marker there; a coordinator that loads the
        prepared record sends them all again. Raises the first failure; once one says this coordinator
        was fenced, nothing more is sent."""
        image, coordinator_epoch = self.broker.image, loaded.leader_epoch
        by_leader: dict[int, list] = defaultdict(list)
        failures: list[RiverlogError] = []
        done_partitions, done_groups = [], []
        for topic, partition in sorted(meta.partitions):
            t = image.topics.get(topic)
            if t is None or partition >= t.num_partitions:
                done_partitions.append((topic, partition))  # deleted since: nothing to mark
                continue
            leader = t.partitions[partition].leader
            if leader < 0:
                failures.append(NotLeaderOrFollowerError(f"{topic}-{partition} has no leader"))
            else:
                by_leader[leader].append((topic, partition))
        timeout_ms = self.config["offsets.commit.timeout.ms"]
        for leader, tps in by_leader.items():
            request = pb.WriteTxnMarkersRequest(producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
                                                commit=meta.commit, coordinator_epoch=coordinator_epoch,
                                                timeout_ms=timeout_ms, partitions=grouped(tps))
            _collect(lambda: self._send(leader, request).partitions, failures,
                     lambda r: done_partitions.append((r.topic, r.partition)))
            if any(isinstance(e, TransactionCoordinatorFencedError) for e in failures):
                break  # deposed: send nothing more (Kafka cancels the transaction's markers)
        for group in sorted(meta.groups):
            if any(isinstance(e, TransactionCoordinatorFencedError) for e in failures):
                break
            request = pb.WriteTxnMarkersRequest(producer_id=meta.producer_id, producer_epoch=meta.producer_epoch,
                                                commit=meta.commit, coordinator_epoch=coordinator_epoch,
                                                timeout_ms=timeout_ms, groups=[group])
            _collect(lambda: self._send(self.groups.find_coordinator(group)[0], request).groups, failures,
                     lambda r: done_groups.append(r.group_id))
        loaded.shard.marked(meta.transactional_id, done_partitions, done_groups)
        if failures:
            raise next((e for e in failures if isinstance(e, TransactionCoordinatorFencedError)), failures[0])

    def _send(self, node: int, request) -> pb.WriteTxnMarkersResponse:
        if node == self.broker.node_id:
            return self.write_markers_here(request)
        address = self.broker._address_of(node)
        if address is None:
            raise NotLeaderOrFollowerError(f"broker {node} is not registered")
        try:
            return self.broker.peers.public(address).WriteTxnMarkers(request, timeout=request.timeout_ms / 1000 + 5)
        except grpc.RpcError as e:
            raise translate_rpc_error(e, f"WriteTxnMarkers to broker {node}") from None

    def write_markers_here(self, request: pb.WriteTxnMarkersRequest) -> pb.WriteTxnMarkersResponse:
        """This broker's part of WriteTxnMarkers: the partitions it leads, the groups it coordinates.
        A partition deleted since the transaction touched it has nothing to mark (no error)."""
        response = write_partition_markers(
            self.broker, request, max(request.timeout_ms, 1) / 1000.0,
            lambda partition: partition.write_marker(request.producer_id, request.producer_epoch, request.commit,
                                                     request.coordinator_epoch),
            deleted_ok=True)
        for group in request.groups:
            result = response.groups.add(group_id=group)
            try:
                self.groups.run(group, lambda shard: (None, shard.end_transaction(
                    group, request.producer_id, request.producer_epoch, request.commit, request.coordinator_epoch)))
            except RiverlogError as e:
                result.error_code, result.error_message = e.code, e.message
        return response

    # ------------------------------------------------------------------------------ timers
    def tick(self, loaded, now_ms: int) -> None:
        shard: TransactionShard = loaded.shard
        for txn_id in shard.timed_out(now_ms):
            log.info("transaction '%s' exceeded its transaction.timeout.ms: aborting it", txn_id)
            _, records = shard.abort(txn_id, now_ms)
            try:
                if records:
                    self.write(loaded, records)
            except RiverlogError as e:
                log.warning("could not abort transaction '%s': %r", txn_id, e)
                return
        for meta in shard.prepared():
            try:
                self._write_markers(loaded, meta)
                self.write(loaded, shard.complete(meta.transactional_id, now_ms))
            except TransactionCoordinatorFencedError as e:
                self._fenced(loaded, meta, e)
                return
            except RiverlogError as e:
                log.debug("transaction '%s' still completing: %r", meta.transactional_id, e)
        if now_ms < self._next_expiry.get(shard.partition, 0):
            return
        self._next_expiry[shard.partition] = now_ms + self.config[
            "transaction.remove.expired.transaction.cleanup.interval.ms"]
        tombstones = shard.expire(now_ms)
        if tombstones:
            try:
                self.write(loaded, tombstones)
                log.info("forgot %d idle transactional id(s) (transactional.id.expiration.ms)", len(tombstones))
            except RiverlogError as e:
                log.warning("could not expire transactional ids: %r", e)


def write_partition_markers(broker, request: pb.WriteTxnMarkersRequest, timeout_s: float, write,
                            deleted_ok: bool) -> pb.WriteTxnMarkersResponse:
    """The partitions' part of a WriteTxnMarkers this broker answers, a coordinator's or an
    administrator's (:mod:`broker.server.admin_markers`): ``write(partition)`` appends the marker
    (its ``LogAppendInfo``), then it waits up to ``timeout_s`` for the replicas (acks=all). A
    partition's failure is its result's error (``NOT_LEADER_OR_FOLLOWER`` elsewhere, the marker
    checks'); an unknown partition is not one when ``deleted_ok``."""
    response = pb.WriteTxnMarkersResponse()
    for g in request.partitions:
        for index in g.partitions:
            result = response.partitions.add(topic=g.topic, partition=index)
            try:
                partition = broker.partition(g.topic, index)
                partition.wait_for_replication(write(partition), timeout_s)
            except UnknownTopicOrPartitionError as e:
                if not deleted_ok:
                    result.error_code, result.error_message = e.code, e.message
            except RiverlogError as e:
                result.error_code, result.error_message = e.code, e.message
    return response


def _collect(send, failures: list, done) -> None:
    """One WriteTxnMarkers request's results: each failure (the request's, or a partition's or
    group's) into ``failures``, each success to ``done``."""
    try:
        results = send()
    except RiverlogError as e:
        failures.append(e)
        return
    for r in results:
        if r.error_code:
            failures.append(error_for_code(r.error_code)(r.error_message))
        else:
            done(r)
