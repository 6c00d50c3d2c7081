"""Transaction requests: protobuf in, :class:`TransactionRuntime` operations, protobuf out."""
from __future__ import annotations

import grpc

from broker.client.cluster import translate_rpc_error
from broker.errors import (CoordinatorLoadInProgressError, CoordinatorNotAvailableError, InvalidGroupIdError,
                           NotCoordinatorError, RiverlogError, UnknownTopicOrPartitionError)
from broker.group.group import Committed
from broker.proto import riverlog_pb2 as pb
from broker.proto.partitions import add_results, grouped, pairs
from broker.server.group_handlers import drop_oversized_metadata, drop_unknown_partitions
from broker.server.txn_runtime import TransactionRuntime
from broker.transaction.coordinator import DEAD, TXN_TOPIC, TransactionMetadata, verify_offsets_in_transaction


class TransactionHandlers:
    def __init__(self, runtime: TransactionRuntime):
        self.runtime = runtime
        self.broker = runtime.broker

    def init_producer_id(self, request: pb.InitProducerIdRequest) -> pb.InitProducerIdResponse:
        """``transaction_timeout_ms`` is required: 0 (also when unset) is ``INVALID_TRANSACTION_TIMEOUT``,
        as Kafka's ``validateTransactionTimeoutMs``, never a default the producer did not ask for."""
        expected = ((request.producer_id, request.producer_epoch)
                    if request.HasField("producer_id") and request.HasField("producer_epoch") else None)
        pid, epoch = self.runtime.init_producer_id(request.transactional_id, request.transaction_timeout_ms, expected)
        return pb.InitProducerIdResponse(producer_id=pid, producer_epoch=epoch)

    def add_partitions(self, request: pb.AddPartitionsToTxnRequest) -> pb.AddPartitionsToTxnResponse:
        """Registers the partitions, all or none. A partition the metadata does not have is refused
        before the coordinator is asked, as Kafka's ``handleAddPartitionsToTxnRequest`` does
        (``UNKNOWN_TOPIC_OR_PARTITION``, the others ``OPERATION_NOT_ATTEMPTED``; here one error for the
        request, naming the unknown ones): a transaction never lists a partition it cannot mark. The
        error is retriable; the producer's records for that partition fail after
        ``delivery.timeout.ms`` and the transaction becomes abortable, as in Kafka's clients."""
        now = self.broker.clock.time_ms()
        tps = pairs(request.partitions)
        unknown = unknown_partitions(self.broker.image, tps)
        if unknown:
            raise UnknownTopicOrPartitionError(
                f"AddPartitionsToTxn of transactional.id '{request.transactional_id}': "
                f"{', '.join(f'{t}-{p}' for t, p in unknown)} do(es) not exist; no partition of the "
                "request was added to the transaction (OPERATION_NOT_ATTEMPTED)")
        self.runtime.run(request.transactional_id, lambda shard: (None, shard.add_partitions(
            request.transactional_id, request.producer_id, request.producer_epoch, tps, now)))
        return pb.AddPartitionsToTxnResponse()

    def add_offsets(self, request: pb.AddOffsetsToTxnRequest) -> pb.AddOffsetsToTxnResponse:
        now = self.broker.clock.time_ms()
        self.runtime.run(request.transactional_id, lambda shard: (None, shard.add_group(
            request.transactional_id, request.producer_id, request.producer_epoch, request.group_id, now)))
        return pb.AddOffsetsToTxnResponse()

    def txn_offset_commit(self, request: pb.TxnOffsetCommitRequest) -> pb.OffsetCommitResponse:
        """Served by the group's coordinator: offsets that count once the transaction commits.
        First verified with the transaction coordinator (KIP-890, as Kafka's
        ``CoordinatorRuntime.scheduleTransactionalWriteOperation``): offsets of a producer that is
        not in an ongoing transaction with this group are refused, or a later transaction's
        commit marker would apply them.

        In Kafka's order (``commitTransactionalOffsets``, then ``commitTransactionalOffset``): the
        transaction is verified and the caller (group, member id, member epoch) validated before
        any offset's metadata is looked at, and an error of either is on every partition the
        cluster has, also on those whose metadata is too large; a caller let in gets
        ``OFFSET_METADATA_TOO_LARGE`` only for those, and the others are kept pending."""
        now = self.broker.clock.time_ms()
        offsets = {(t.name, p.partition): Committed(p.offset, p.metadata, p.leader_epoch, now)
                   for t in request.topics for p in t.partitions}
        response = pb.OffsetCommitResponse()
        offsets = drop_unknown_partitions(self.broker.image, offsets, response.results)
        if not offsets:
            return response
        if not request.group_id:  # checked first, as Kafka's commitTransactionalOffsets does
            add_results(response.results, offsets, InvalidGroupIdError("group.id must not be empty"))
            return response
        refused = pb.OffsetCommitResponse()
        kept = drop_oversized_metadata(offsets, self.broker.config["offset.metadata.max.bytes"], refused.results)
        try:
            self._verify_in_transaction(request)
        except RiverlogError as e:  # about the transaction, not this group's coordinator: per partition
            add_results(response.results, offsets, e)
            return response
        try:
            self.runtime.groups.run(request.group_id, lambda shard: (None, shard.commit_in_transaction(
                request.group_id, request.member_id, request.member_epoch, request.producer_id,
                request.producer_epoch, kept)))
        except (CoordinatorLoadInProgressError, CoordinatorNotAvailableError, NotCoordinatorError):
            raise  # the whole request goes elsewhere or later: the client retries it
        except RiverlogError as e:
            add_results(response.results, offsets, e)
            return response
        add_results(response.results, kept, None)
        response.results.extend(refused.results)
        return response

    def _verify_in_transaction(self, request: pb.TxnOffsetCommitRequest) -> None:
        """Ask the transactional id's coordinator (this broker's shard, or DescribeTransactions to
        its broker) whether the producer's ongoing transaction includes the group. Done before
        the group's shard is locked: the transaction coordinator locks its own shard while it
        writes markers to groups."""
        txn_id = request.transactional_id
        node, _, _ = self.runtime.find_coordinator(txn_id)
        if node == self.broker.node_id:
            meta = self.runtime.read(txn_id, lambda shard: shard.txns.get(txn_id))
        else:
            meta = self._remote_metadata(node, txn_id)
        verify_offsets_in_transaction(meta, txn_id, request.producer_id, request.producer_epoch, request.group_id)

    def _remote_metadata(self, node: int, txn_id: str) -> TransactionMetadata | None:
        address = self.broker._address_of(node)
        if address is None:
            raise CoordinatorNotAvailableError(f"broker {node}, coordinator of transactional.id '{txn_id}', "
                                               "is not registered")
        try:
            reply = self.broker.peers.public(address).DescribeTransactions(
                pb.DescribeTransactionsRequest(transactional_ids=[txn_id]),
                timeout=self.broker.config["offsets.commit.timeout.ms"] / 1000.0 + 5)
        except grpc.RpcError as e:
            raise translate_rpc_error(e, f"DescribeTransactions to broker {node}") from None
        d = reply.transactions[0]
        if d.error_code or d.state in ("", DEAD):
            return None
        return TransactionMetadata(txn_id, d.producer_id, d.producer_epoch, d.timeout_ms, d.state,
                                   groups=set(d.groups))

    def end(self, request: pb.EndTxnRequest) -> pb.EndTxnResponse:
        self.runtime.end(request.transactional_id, request.producer_id, request.producer_epoch, request.commit)
        return pb.EndTxnResponse()

    def write_markers(self, request: pb.WriteTxnMarkersRequest) -> pb.WriteTxnMarkersResponse:
        return self.runtime.write_markers_here(request)

    def list_transactions(self, request: pb.ListTransactionsRequest) -> pb.ListTransactionsResponse:
        """The transactional.ids of every ``__transaction_state`` partition this broker leads. While
        one of them is not loaded yet the answer is ``COORDINATOR_LOAD_IN_PROGRESS`` (Kafka's
        ``TransactionStateManager.listTransactionStates``): its transactions would be missing."""
        topic = self.broker.image.topics.get(TXN_TOPIC)
        if topic is not None:
            loaded = {shard.partition for shard in self.runtime.shards()}
            loading = [i for i in range(topic.num_partitions)
                       if topic.partitions[i].leader == self.broker.node_id and i not in loaded]
            if loading:
                raise CoordinatorLoadInProgressError(
                    f"broker {self.broker.node_id} is loading the state of {TXN_TOPIC} partition(s) {loading}")
        response = pb.ListTransactionsResponse()
        states = set(request.states)
        for shard in self.runtime.shards():
            for meta in list(shard.txns.values()):  # read without the shard's lock: a forgotten id may be Dead
                if (meta.state is DEAD or (states and meta.state not in states)
                        or not meta.transactional_id.startswith(request.prefix)):
                    continue
                response.transactions.add(transactional_id=meta.transactional_id, producer_id=meta.producer_id,
                                          state=meta.state.value, coordinator=self.broker.node_id)
        return response

    def describe_transactions(self, request: pb.DescribeTransactionsRequest) -> pb.DescribeTransactionsResponse:
        response = pb.DescribeTransactionsResponse()
        for txn_id in request.transactional_ids:
            d = response.transactions.add(transactional_id=txn_id, coordinator=self.broker.node_id)
            try:
                meta = self.runtime.read(txn_id, lambda shard: shard.txns.get(txn_id))
                if meta is None:
                    from broker.errors import TransactionalIdNotFoundError
                    raise TransactionalIdNotFoundError(f"transactional.id '{txn_id}' is unknown")
                d.state, d.producer_id, d.producer_epoch = meta.state.value, meta.producer_id, meta.producer_epoch
                d.timeout_ms, d.start_ms = meta.timeout_ms, meta.start_ms
                d.partitions.extend(grouped(meta.partitions))
                d.groups.extend(sorted(meta.groups))
            except (CoordinatorLoadInProgressError, CoordinatorNotAvailableError, NotCoordinatorError):
                raise  # about the coordinator, not the id: the client finds it again and retries
            except RiverlogError as e:
                d.error_code, d.error_message = e.code, e.message
        return response

    def abort(self, request: pb.AbortTransactionRequest) -> pb.AbortTransactionResponse:
        pid, epoch = self.runtime.abort(request.transactional_id)
        return pb.AbortTransactionResponse(producer_id=pid, producer_epoch=epoch)

    def describe_producers(self, request: pb.DescribeProducersRequest) -> pb.DescribeProducersResponse:
        """Producers of partitions this broker leads, and their open transactions: what holds each
        last stable offset back."""
        response = pb.DescribeProducersResponse()
        for g in request.partitions:
            for index in g.partitions:
                r = response.partitions.add(topic=g.topic, partition=index)
                try:
                    partition = self.broker.partition(g.topic, index)
                    partition.check_leader()
                    r.last_stable_offset, r.high_watermark = partition.stable_offsets()
                    for pid, epoch, first, start in partition.open_transactions():
                        r.open_transactions.add(producer_id=pid, producer_epoch=epoch, first_offset=first,
                                                start_ms=start)
                    for pid, epoch, sequence, last_ms, txn_first in partition.active_producers():
                        r.active_producers.add(producer_id=pid, producer_epoch=epoch, last_sequence=sequence,
                                               last_timestamp=last_ms, current_txn_start_offset=txn_first)
                except RiverlogError as e:
                    r.error_code, r.error_message = e.code, e.message
        return response


def unknown_partitions(image, tps) -> list[tuple[str, int]]:
    """The (topic, partition) pairs of ``tps`` that the metadata ``image`` does not have."""
    out = []
    for topic, partition in sorted(set(tps)):
        t = image.topics.get(topic)
        if t is None or not 0 <= partition < t.num_partitions:
            out.append((topic, partition))
    return out
