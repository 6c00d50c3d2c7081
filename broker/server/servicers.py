"""The gRPC servicers: each RPC of the public and internal services handed to its handler.

Handlers are plain calls (``handlers.py``, ``group_handlers.py``, ``txn_handlers.py``,
``internal.py``); this is where a request meets the asyncio loop. Waits (long-polling fetches,
acks=all produces, DeleteRecords) are awaited on the loop and hold no thread; small reads and
appends whose partition locks are free run on the loop itself, the rest on a thread pool. The
client listener answers ``BrokerNotAvailable`` until its broker serves, and refuses what belongs
on the inter-broker listener (follower fetches, and transaction markers other than an administrator's abort:
see ``admin_markers.py``).
"""
from __future__ import annotations

import json
import time

from broker.errors import (BrokerNotAvailableError, ClusterAuthorizationFailedError, InvalidRequestError,
                           NotCoordinatorError, RiverlogError)
from broker.proto import riverlog_pb2 as pb
from broker.proto import riverlog_pb2_grpc as pb_grpc
from broker.protocol import CoordinatorType
from broker.server.admin_markers import refusal, write_admin_abort
from broker.server.client_host import client_host
from broker.server.group_handlers import GroupHandlers
from broker.server.handlers import Handlers
from broker.server.internal import InternalHandlers
from broker.server.rpc import AsyncWaiter, RpcLoop, hold_if_free
from broker.server.txn_handlers import TransactionHandlers

#: A produce request or a client fetch's read smaller than this runs on the loop itself when its
#: partitions' locks are free (a page-cache copy of ~0.1 ms); larger ones and any that would wait
#: for a lock, an fsync or a segment roll go to the pool, so the loop never stalls on them.
INLINE_BYTES = 256 << 10
#: Work on the loop that took longer than this (a page-cache write stalled by writeback, a
#: descheduled process) sends the next :data:`POOL_AFTER_SLOW_S` of work to the pool instead.
SLOW_ON_LOOP_S, POOL_AFTER_SLOW_S = 0.02, 1.0


def _delegate(target):
    """A servicer method that runs ``target(servicer)(request)`` on the servicer's pool."""
    async def method(self, request, context):
        return await self.run(target(self), request)
    return method


class ClientServicer(pb_grpc.RiverlogServicer):
    """The public service. Work runs on ``pool``; waits (long polls, acks=all) are awaited.

    On the client listener a broker answers nothing but ``BrokerNotAvailable`` (retriable: the
    client tries again, or another broker, within its timeout) until it has caught up with the
    metadata log, registered and been unfenced, as Kafka's brokers do: before that, its view of the
    cluster (no brokers yet, leaderships that moved while it was down) would mislead.
    """

    inter_broker = False

    def __init__(self, rpc: RpcLoop, pool, handlers: Handlers, groups: GroupHandlers | None,
                 transactions: TransactionHandlers | None):
        self.rpc, self.pool = rpc, pool
        self.h, self.g, self.t = handlers, groups, transactions
        self.waiter = AsyncWaiter(handlers.broker.replicas.notifier)
        self._pool_until = 0.0  # see SLOW_ON_LOOP_S

    async def run(self, fn, *args):
        self._check_serving()
        return await self.rpc.loop.run_in_executor(self.pool, fn, *args)

    def _check_serving(self) -> None:
        broker = self.h.broker
        if not self.inter_broker and broker.is_broker and not broker.serving:
            raise BrokerNotAvailableError(
                f"broker {broker.node_id} is starting: not yet registered, caught up and unfenced")

    def _on_loop_or_pool(self, fn, request, locks):
        """``fn(request)`` at once on the loop while holding ``locks`` (see :func:`hold_if_free`),
        or None: then the caller awaits it on the pool."""
        held = hold_if_free(locks)
        if held is None:
            return None
        started = time.monotonic()
        try:
            return fn(request)
        finally:
            for lock in held:
                lock.release()
            now = time.monotonic()
            if now - started > SLOW_ON_LOOP_S:
                self._pool_until = now + POOL_AFTER_SLOW_S

    def _partition_locks(self, request, hint) -> list | None:
        """The locks of the partitions ``request`` names when ``hint(partition, p) -> bytes`` adds
        up to less than :data:`INLINE_BYTES` (None otherwise, or when one is not hosted here: the
        pool path reports that per partition)."""
        self._check_serving()
        if self._pool_until and time.monotonic() < self._pool_until:
            return None
        partition_of, locks, total = self.h.broker.partition, [], 0
        try:
            for topic in request.topics:
                for p in topic.partitions:
                    partition = partition_of(topic.name, p.partition)
                    total += hint(partition, p)
                    if total >= INLINE_BYTES:
                        return None
                    locks.append(partition.lock)
        except RiverlogError:
            return None
        return locks

    def _groups(self) -> GroupHandlers:
        if self.g is None:
            raise NotCoordinatorError("this node has no broker role: it coordinates no groups")
        return self.g

    def _txns(self) -> TransactionHandlers:
        if self.t is None:
            raise NotCoordinatorError("this node has no broker role: it coordinates no transactions")
        return self.t

    Metadata = _delegate(lambda s: s.h.metadata)
    CreateTopics = _delegate(lambda s: s.h.create_topics)
    DeleteTopics = _delegate(lambda s: s.h.delete_topics)
    CreatePartitions = _delegate(lambda s: s.h.create_partitions)
    ElectLeaders = _delegate(lambda s: s.h.elect_leaders)
    DescribeCluster = _delegate(lambda s: s.h.describe_cluster)
    ListOffsets = _delegate(lambda s: s.h.list_offsets)
    OffsetForLeaderEpoch = _delegate(lambda s: s.h.offset_for_leader_epoch)
    DescribeConfigs = _delegate(lambda s: s.h.describe_configs)
    AlterConfigs = _delegate(lambda s: s.h.alter_configs)
    InitProducerId = _delegate(lambda s: s._init_producer_id)
    FindCoordinator = _delegate(lambda s: s._find_coordinator)
    AddPartitionsToTxn = _delegate(lambda s: s._txns().add_partitions)
    AddOffsetsToTxn = _delegate(lambda s: s._txns().add_offsets)
    TxnOffsetCommit = _delegate(lambda s: s._txns().txn_offset_commit)
    EndTxn = _delegate(lambda s: s._txns().end)
    ListTransactions = _delegate(lambda s: s._txns().list_transactions)
    DescribeTransactions = _delegate(lambda s: s._txns().describe_transactions)
    AbortTransaction = _delegate(lambda s: s._txns().abort)
    DescribeProducers = _delegate(lambda s: s._txns().describe_producers)

    async def ConsumerGroupHeartbeat(self, request, context):
        """The member's client host (Kafka's, from the connection) goes with its heartbeat."""
        return await self.run(self._groups().heartbeat, request, client_host(context.peer()))

    OffsetCommit = _delegate(lambda s: s._groups().offset_commit)
    OffsetFetch = _delegate(lambda s: s._groups().offset_fetch)
    ListGroups = _delegate(lambda s: s._groups().list_groups)
    DescribeGroups = _delegate(lambda s: s._groups().describe_groups)
    DeleteGroups = _delegate(lambda s: s._groups().delete_groups)
    OffsetDelete = _delegate(lambda s: s._groups().offset_delete)

    def _init_producer_id(self, request):
        if request.transactional_id:
            return self._txns().init_producer_id(request)
        return self.h.init_producer_id(request)

    def _find_coordinator(self, request):
        runtime = (self._txns() if request.key_type == CoordinatorType.TRANSACTION else self._groups()).runtime
        node, host, port = runtime.find_coordinator(request.group_id)
        return pb.FindCoordinatorResponse(node_id=node, host=host, port=port)

    async def Produce(self, request, context):
        return await self._produce(request)

    async def ProduceStream(self, request_iterator, context):
        async for request in request_iterator:  # an idle stream awaits here, holding no thread
            response = await self._produce(request)
            response.correlation_id = request.correlation_id
            yield response

    async def _produce(self, request) -> pb.ProduceResponse:
        size = request.ByteSize()  # not len(records): each read of a bytes field copies it
        locks = self._partition_locks(request, lambda partition, p: 0 if partition.append_is_quick(size)
                                      else INLINE_BYTES) if size < INLINE_BYTES else None
        done = self._on_loop_or_pool(self.h.append, request, locks) if locks else None
        response, waiting = done if done is not None else await self.run(self.h.append, request)
        while waiting:  # acks=all: await the replicas; the HW's moves bump the notifier
            sequence = self.waiter.notifier.sequence
            still = self._on_loop_or_pool(self.h.settle, waiting, [w.partition.lock for w in waiting])
            waiting = still if still is not None else await self.run(self.h.settle, waiting)
            if waiting:
                soonest = min(w.deadline for w in waiting) - time.monotonic()
                await self.waiter.wait_past(sequence, min(max(soonest, 0.0), 0.5))
        return response

    async def DeleteRecords(self, request, context):
        """Answered once every partition's low watermark reached its offset or its timeout passed
        (Kafka's ``DelayedDeleteRecords``); followers' fetches carrying a higher log start bump the
        notifier, and a follower fenced meanwhile stops counting at the next check."""
        response, waiting = await self.run(self.h.delete_records, request)
        while waiting:
            sequence = self.waiter.notifier.sequence
            waiting = await self.run(self.h.settle_deletions, waiting)
            if waiting:
                soonest = min(d.deadline for d in waiting) - time.monotonic()
                await self.waiter.wait_past(sequence, min(max(soonest, 0.0), 0.5))
        return response

    async def Fetch(self, request, context):
        if request.replica_id >= 0 and not self.inter_broker:
            raise ClusterAuthorizationFailedError(
                f"a follower fetch (replica_id {request.replica_id}) belongs on the inter-broker listener, "
                "not the client listener")
        deadline = time.monotonic() + self.h.fetch_wait_s(request)
        while True:
            sequence = self.waiter.notifier.sequence
            if request.replica_id >= 0:
                locks = self._follower_at_end_locks(request)
            else:
                locks = self._partition_locks(request, lambda partition, p: partition.read_size_hint(p.fetch_offset))
            done = self._on_loop_or_pool(self.h.fetch_once, request, locks) if locks else None
            response, satisfied = done if done is not None else await self.run(self.h.fetch_once, request)
            remaining = deadline - time.monotonic()
            if satisfied or remaining <= 0:
                return response
            await self.waiter.wait_past(sequence, remaining)
            if request.replica_id >= 0:  # a follower at the log end: read again once there is more
                await self._await_follower_data(request, deadline)

    def _follower_at_end_locks(self, request) -> list | None:
        """A follower fetch at the leader's log end reads nothing: it records the follower's offset
        (which may move the HW and answer acks=all) and waits, so it runs on the loop when its
        locks are free. One with data to read goes to the pool."""
        if not self.h.broker.replicas.follower_fetch_waits(request):
            return None
        return self._partition_locks(request, lambda partition, p: 0)

    async def _await_follower_data(self, request, deadline: float) -> None:
        """Wait, checking on the loop without a pool hop, while no partition of a follower fetch
        has anything new: every bump on this broker wakes the fetch (an append to another
        partition, a high-watermark move), and most have nothing for it. The read at the deadline
        refreshes the high watermark the empty answer carries."""
        nothing_new = self.h.broker.replicas.follower_fetch_waits
        while True:
            sequence = self.waiter.notifier.sequence
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not nothing_new(request):
                return
            await self.waiter.wait_past(sequence, remaining)

    async def WriteTxnMarkers(self, request, context):
        if not self.inter_broker:
            # an administrator's abort of a hanging transaction (kafka-transactions abort): ABORT only
            reason = refusal(request)
            if reason is not None:
                raise ClusterAuthorizationFailedError(reason)
            return await self.run(lambda r: write_admin_abort(self.h.broker, r), request)
        return await self.run(self._txns().write_markers, request)


class InterBrokerServicer(ClientServicer):
    """The same service on the inter-broker listener, where follower fetches and markers belong."""

    inter_broker = True


class InternalServicer(pb_grpc.RiverlogInternalServicer):
    def __init__(self, rpc: RpcLoop, pool, internal: InternalHandlers):
        self.rpc, self.pool, self.internal = rpc, pool, internal

    async def Call(self, request, context):
        try:
            body = json.loads(request.body) if request.body else {}
        except ValueError as e:
            raise InvalidRequestError(f"internal {request.method}: the body is not JSON ({e})") from None
        result = await self.rpc.loop.run_in_executor(self.pool, self.internal.call, request.method, body)
        return pb.InternalResponse(body=json.dumps(result).encode())


__all__ = ["ClientServicer", "InterBrokerServicer", "InternalServicer"]
