"""Request handling: protobuf requests in, protobuf responses out (Kafka's ``KafkaApis``).

No handler waits for data or replicas: an acks=all produce returns what still waits for its replicas
(:meth:`Handlers.append`, then :meth:`Handlers.settle`), so does a DeleteRecords
(:meth:`Handlers.delete_records`, then :meth:`Handlers.settle_deletions`), and a fetch is one read
(:meth:`Handlers.fetch_once`); the server awaits between the steps without holding a thread.

Per-partition failures become that partition's ``error_code`` so the rest of the request still
succeeds; only whole-request problems raise. No gRPC here: handlers are plain calls, testable
without a network. Record bytes are passed through untouched.
"""
from __future__ import annotations

import logging
import time

from broker.errors import (BrokerNotAvailableError, InvalidRequestError, InvalidRequiredAcksError,
                           LeaderNotAvailableError, NotLeaderOrFollowerError, RequestTimedOutError, RiverlogError,
                           TopicAlreadyExistsError, UnknownTopicOrPartitionError)
from broker.group.coordinator import OFFSETS_TOPIC
from broker.proto import riverlog_pb2 as pb
from broker.server.broker import Broker
from broker.server.config_handlers import alter_configs, describe_configs
from broker.server.request_results import fill_error
from broker.server.topic_handlers import create_partitions, create_topics, delete_topics, elect_leaders
from broker.transaction.coordinator import TXN_TOPIC

log = logging.getLogger(__name__)

EARLIEST, LATEST, MAX_TIMESTAMP = -2, -1, -3
# KIP-405's specs (Kafka's ListOffsetsRequest): without tiered storage the local log is the whole
# log, so the earliest local offset is the log start and nothing is tiered (-1).
EARLIEST_LOCAL, LATEST_TIERED = -4, -5
# Kafka's Topic.isInternal: the topics the brokers keep for themselves. Only these are marked
# internal in Metadata, and only these are not auto-created by a Metadata request (their
# coordinators create them, with their own settings, on first use).
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TXN_TOPIC})


class Handlers:
    def __init__(self, broker: Broker, host: str, port: int):
        self.broker = broker
        self.host = host
        self.port = port

    def _partition(self, topic: str, index: int):
        """A partition to read or write, once this broker has caught up with the metadata log: until
        then its image may still name it leader of partitions that have moved on while it was down."""
        b = self.broker
        if b.is_broker and not b.serving:
            raise NotLeaderOrFollowerError(f"broker {b.node_id} is still catching up with the metadata log")
        return b.partition(topic, index)

    # ---------------------------------------------------------------------------- metadata
    def metadata(self, request: pb.MetadataRequest) -> pb.MetadataResponse:
        b = self.broker
        if b.is_broker and not b.serving:
            raise BrokerNotAvailableError(f"broker {b.node_id} is still catching up with the metadata log")
        image = b.image
        controller = b.runtime.leader_id if b.runtime is not None else b.controller.leader_hint
        response = pb.MetadataResponse(cluster_id=b.cluster_id, controller_id=-1 if controller is None else controller)
        for node in sorted(image.brokers.values(), key=lambda n: n.node_id):
            if not node.fenced:
                response.brokers.add(node_id=node.node_id, host=node.host, port=node.port)
        names = sorted(image.topics) if request.all_topics else list(request.topics)
        for name in names:
            tm = response.topics.add(name=name)
            topic = image.topics.get(name)
            if topic is None and request.allow_auto_topic_creation and b.config["auto.create.topics.enable"]:
                try:
                    topic = self._auto_create(name)
                except Exception as e:  # noqa: BLE001 - reported for this topic
                    fill_error(tm, e)
                    continue
            if topic is None:
                fill_error(tm, UnknownTopicOrPartitionError(
                    f"topic '{name}' does not exist" + ("" if b.config["auto.create.topics.enable"] else
                                                       " (auto.create.topics.enable is false on the broker)")))
                continue
            tm.topic_id = topic.topic_id
            tm.internal = name in INTERNAL_TOPICS
            for index, p in enumerate(topic.partitions):
                pm = tm.partitions.add(partition=index, leader=p.leader, leader_epoch=p.leader_epoch,
                                       replicas=p.replicas, isr=p.isr)
                if p.leader < 0:
                    pm.error_code = LeaderNotAvailableError.code
                    pm.error_message = f"{name}-{index} has no leader: in-sync replicas {p.isr} are unavailable"
        return response

    def _auto_create(self, name: str):
        """Kafka's ``auto.create.topics.enable``: a producer's or consumer's metadata request creates
        an unknown topic with ``num.partitions`` and ``default.replication.factor``; returns it once
        this broker's image shows it (another client may have created it first)."""
        if name in INTERNAL_TOPICS:
            raise UnknownTopicOrPartitionError(f"topic '{name}' does not exist yet; its coordinator creates it on "
                                               "first use")
        try:
            self.broker.create_topic(name, -1, -1, {})
        except TopicAlreadyExistsError:
            pass
        log.info("created topic '%s' on first use (auto.create.topics.enable)", name)
        return self.broker.topic(name)

    def describe_cluster(self, request) -> pb.DescribeClusterResponse:
        b = self.broker
        image = b.image
        controller = b.runtime.leader_id if b.runtime is not None else b.controller.leader_hint
        response = pb.DescribeClusterResponse(cluster_id=b.cluster_id, metadata_offset=image.offset,
                                              controller_id=-1 if controller is None else controller)
        nodes = set(image.brokers) | set(b.voters)
        for node_id in sorted(nodes):
            reg = image.brokers.get(node_id)
            host, port = (reg.host, reg.port) if reg else b.voters[node_id]
            response.nodes.add(node_id=node_id, host=host, port=port, fenced=reg.fenced if reg else False,
                               shutting_down=reg.shutting_down if reg else False, voter=node_id in b.voters,
                               broker=reg is not None)
        return response

    # ---------------------------------------------------------------------------- topics
    def create_topics(self, request: pb.CreateTopicsRequest) -> pb.CreateTopicsResponse:
        return create_topics(self.broker, request)

    def delete_topics(self, request: pb.DeleteTopicsRequest) -> pb.DeleteTopicsResponse:
        return delete_topics(self.broker, request)

    def create_partitions(self, request: pb.CreatePartitionsRequest) -> pb.CreatePartitionsResponse:
        return create_partitions(self.broker, request)

    def elect_leaders(self, request: pb.ElectLeadersRequest) -> pb.ElectLeadersResponse:
        return elect_leaders(self.broker, request)

    def init_producer_id(self, request: pb.InitProducerIdRequest) -> pb.InitProducerIdResponse:
        """An idempotent producer's id (a transactional.id's goes to its coordinator instead); with
        the producer's current id and epoch, its next epoch (KIP-360: the broker decides)."""
        from broker.transaction.coordinator import next_idempotent_epoch
        if request.HasField("producer_id") and request.HasField("producer_epoch"):
            pid, epoch = next_idempotent_epoch(request.producer_id, request.producer_epoch,
                                               self.broker.producer_ids.next_id)
            return pb.InitProducerIdResponse(producer_id=pid, producer_epoch=epoch)
        return pb.InitProducerIdResponse(producer_id=self.broker.producer_ids.next_id(), producer_epoch=0)

    # ---------------------------------------------------------------------------- produce
    def append(self, request: pb.ProduceRequest) -> tuple[pb.ProduceResponse, list["Replicating"]]:
        """Append every partition's batches; acks=all ones come back as :class:`Replicating` for
        :meth:`settle`, so the caller can wait for the replicas without holding a thread."""
        response = pb.ProduceResponse()
        waiting: list[Replicating] = []
        acks_ok = request.acks in (0, 1, -1)
        deadline = time.monotonic() + max(request.timeout_ms, 1) / 1000.0
        for topic in request.topics:
            tr = response.topics.add(name=topic.name)
            for p in topic.partitions:
                pr = tr.partitions.add(partition=p.partition, base_offset=-1, log_append_time=-1)
                try:
                    if not acks_ok:
                        raise InvalidRequiredAcksError(f"acks must be 0, 1 or -1 (all), got {request.acks}")
                    partition = self._partition(topic.name, p.partition)
                    # the epoch the append was made in, read with it: one read before could be of a
                    # leadership that ended (a spurious NOT_LEADER_OR_FOLLOWER, and a duplicate on retry)
                    info = partition.append_records(p.records, request.acks)
                    appended = Replicating(pr, partition, info, info.leader_epoch, deadline)
                    if request.acks == -1:
                        waiting.append(appended)
                    else:
                        appended.done()
                except Exception as e:  # noqa: BLE001
                    fill_error(pr, e)
        return response, waiting

    @staticmethod
    def settle(waiting: list["Replicating"]) -> list["Replicating"]:
        """Answer the acks=all appends that are replicated (or failed); return those still waiting."""
        still = []
        for w in waiting:
            try:
                if w.partition.is_replicated(w.info, w.epoch):
                    w.done()
                elif time.monotonic() >= w.deadline:
                    raise w.partition.replication_timeout(w.info)
                else:
                    still.append(w)
            except Exception as e:  # noqa: BLE001
                fill_error(w.result, e)
        return still

    # ---------------------------------------------------------------------------- fetch
    def fetch_wait_s(self, request: pb.FetchRequest) -> float:
        """How long this fetch may long-poll: the client's ``max_wait_ms``, cut to the broker's
        ``fetch.max.wait.ms`` so no request parks without bound."""
        return min(max(0, request.max_wait_ms), self.broker.config["fetch.max.wait.ms"]) / 1000.0

    def fetch_once(self, request: pb.FetchRequest) -> tuple[pb.FetchResponse, bool]:
        """One read of every asked partition, and whether it answers the fetch (enough bytes, or
        an error to report)."""
        max_bytes = request.max_bytes if request.max_bytes > 0 else self.broker.config["fetch.max.bytes"]
        max_bytes = min(max_bytes, self.broker.config["fetch.max.bytes"])
        response, total, failed = self._read_once(request, max_bytes)
        return response, failed or total >= request.min_bytes  # min_bytes 0: answer at once, as Kafka

    def _read_once(self, request: pb.FetchRequest, max_bytes: int):
        """Read the partitions in request order within ``max_bytes`` (``fetch.max.bytes``). Only
        while nothing has been read may a partition's first batch exceed what is left (KIP-74, Kafka's
        ``ReplicaManager.readFromLog``: ``minOneMessage`` turns false after the first partition with
        records), so the response stays within the limit unless a single batch is larger."""
        response = pb.FetchResponse()
        total, failed = 0, False
        for topic in request.topics:
            tr = response.topics.add(name=topic.name)
            for p in topic.partitions:
                pr = tr.partitions.add(partition=p.partition, high_watermark=-1, last_stable_offset=-1,
                                       log_start_offset=-1, log_end_offset=-1)
                try:
                    partition = self._partition(topic.name, p.partition)
                    budget = min(p.max_bytes if p.max_bytes > 0 else max_bytes, max(0, max_bytes - total))
                    epoch = p.current_leader_epoch if p.HasField("current_leader_epoch") else -1
                    if budget == 0 and total > 0:   # no bytes left: the offsets, still only from the leader
                        start, hw, end = partition.leader_offsets(epoch)
                        pr.high_watermark, pr.last_stable_offset = hw, hw
                        pr.log_start_offset, pr.log_end_offset = start, end
                        continue
                    min_one = total == 0
                    if request.replica_id >= 0:
                        start = p.log_start_offset if p.HasField("log_start_offset") else -1
                        result = partition.read_for_follower(request.replica_id, p.fetch_offset, max(budget, 1),
                                                             epoch, request.replica_epoch or -1, min_one, start)
                    else:
                        result = partition.read(p.fetch_offset, max(budget, 1), leader_epoch=epoch,
                                                read_committed=request.isolation_level == 1, min_one_batch=min_one)
                        for a in result.aborted:
                            pr.aborted_transactions.add(producer_id=a.producer_id, first_offset=a.first_offset)
                    pr.records = bytes(result.records)
                    pr.high_watermark = result.high_watermark
                    pr.last_stable_offset = result.last_stable_offset if result.last_stable_offset >= 0 \
                        else result.high_watermark
                    pr.log_start_offset, pr.log_end_offset = result.log_start_offset, result.log_end_offset
                    total += len(result.records)
                except Exception as e:  # noqa: BLE001
                    fill_error(pr, e)
                    for key in ("log_start_offset", "log_end_offset"):
                        if isinstance(e, RiverlogError) and key in e.details:
                            setattr(pr, key, e.details[key])
                    failed = True
        return response, total, failed

    # ---------------------------------------------------------------------------- offsets
    def list_offsets(self, request: pb.ListOffsetsRequest) -> pb.ListOffsetsResponse:
        response = pb.ListOffsetsResponse()
        for topic in request.topics:
            tr = response.topics.add(name=topic.name)
            for p in topic.partitions:
                pr = tr.partitions.add(partition=p.partition, offset=-1, timestamp=-1, leader_epoch=-1)
                try:
                    partition = self._partition(topic.name, p.partition)
                    partition.check_leader()
                    found = None
                    # each answer is read in one step with its leadership check (the leader may move
                    # between two calls, and a follower's offsets are not the leader's)
                    if p.timestamp in (EARLIEST, EARLIEST_LOCAL):
                        pr.offset, pr.leader_epoch = partition.earliest_offset()
                    elif p.timestamp == LATEST_TIERED:
                        pass   # -1: Kafka's UnifiedLog.fetchOffsetByTimestamp without remote storage
                    elif p.timestamp == LATEST:  # read_committed: the last stable offset, as Kafka;
                        # the current leader epoch, as Kafka's Partition answers
                        pr.offset, pr.leader_epoch = partition.latest_offset(request.isolation_level == 1)
                    elif p.timestamp == MAX_TIMESTAMP:
                        found = partition.max_timestamp(request.isolation_level == 1)
                    elif p.timestamp < 0:
                        raise InvalidRequestError(f"timestamp {p.timestamp} is not a time nor -1 to -5")
                    else:
                        found = partition.offset_for_timestamp(p.timestamp, request.isolation_level == 1)
                    if found:
                        pr.offset, pr.timestamp = found
                        pr.leader_epoch = partition.epoch_of(found[0])
                except Exception as e:  # noqa: BLE001
                    fill_error(pr, e)
                    pr.leader_epoch = -1
        return response

    def offset_for_leader_epoch(self, request: pb.OffsetForLeaderEpochRequest) -> pb.OffsetForLeaderEpochResponse:
        """KIP-320: a consumer validating its position asks where its position's epoch ends here
        (the same answer a returning follower gets on the inter-broker listener)."""
        response = pb.OffsetForLeaderEpochResponse()
        for topic in request.topics:
            tr = response.topics.add(name=topic.name)
            for p in topic.partitions:
                pr = tr.partitions.add(partition=p.partition, leader_epoch=-1, end_offset=-1)
                try:
                    current = p.current_leader_epoch if p.HasField("current_leader_epoch") else -1
                    partition = self._partition(topic.name, p.partition)
                    pr.leader_epoch, pr.end_offset = partition.end_offset_for_epoch(p.leader_epoch, current)
                except Exception as e:  # noqa: BLE001
                    fill_error(pr, e)
                    pr.leader_epoch, pr.end_offset = -1, -1
        return response

    def delete_records(self, request: pb.DeleteRecordsRequest) -> tuple[pb.DeleteRecordsResponse, list["Deleting"]]:
        """DeleteRecords: each partition's leader moves its log start offset; the partitions come
        back as :class:`Deleting` for :meth:`settle_deletions`, which answers each once its low
        watermark reached the offset (Kafka's ``ReplicaManager.deleteRecords``), so the caller can
        wait for the followers without holding a thread."""
        response = pb.DeleteRecordsResponse()
        waiting: list[Deleting] = []
        deadline = time.monotonic() + max(request.timeout_ms, 0) / 1000.0
        for topic in request.topics:
            tr = response.topics.add(name=topic.name)
            for p in topic.partitions:
                pr = tr.partitions.add(partition=p.partition, low_watermark=-1)
                try:
                    partition = self._partition(topic.name, p.partition)
                    start = partition.delete_records(p.offset)
                    # Kafka's deleteRecordsOnLeader: -1 became the high watermark, now the log start.
                    waiting.append(Deleting(pr, partition, start if p.offset == -1 else p.offset,
                                            deadline, request.timeout_ms))
                except Exception as e:  # noqa: BLE001 - reported per partition
                    fill_error(pr, e)
        return response, self.settle_deletions(waiting, expire=False)

    def settle_deletions(self, waiting: list["Deleting"], expire: bool = True) -> list["Deleting"]:
        """Answer the deletions whose low watermark (the smallest log start over the leader and its
        followers on alive brokers) reached the offset; return those still waiting. Past its deadline
        a partition answers REQUEST_TIMED_OUT (Kafka's ``DelayedDeleteRecords.onExpiration``): its
        leader's records are gone, but a follower that could take over may still serve them."""
        still = []
        for d in waiting:
            try:
                low = d.partition.low_watermark(self._alive_broker)
                if low >= d.required:
                    d.result.low_watermark = low
                elif expire and time.monotonic() >= d.deadline:
                    raise RequestTimedOutError(
                        f"{d.partition.topic}-{d.partition.index}: not every replica moved its log start to "
                        f"{d.required} within the request's timeout ({d.timeout_ms} ms); the low watermark is "
                        f"{low}. Retry: the deletion is kept on the leader")
                else:
                    still.append(d)
            except Exception as e:  # noqa: BLE001 - reported per partition
                fill_error(d.result, e)
        return still

    def _alive_broker(self, node_id: int) -> bool:
        """Registered and unfenced (Kafka's ``KRaftMetadataCache.hasAliveBroker``): only such a
        follower holds a DeleteRecords answer back."""
        registration = self.broker.image.brokers.get(node_id)
        return registration is not None and not registration.fenced

    # ---------------------------------------------------------------------------- configs
    def describe_configs(self, request: pb.DescribeConfigsRequest) -> pb.DescribeConfigsResponse:
        return describe_configs(self.broker, request)

    def alter_configs(self, request: pb.AlterConfigsRequest) -> pb.AlterConfigsResponse:
        return alter_configs(self.broker, request)


class Deleting:
    """A DeleteRecords partition waiting for its followers' log starts: where to write the answer."""
    __slots__ = ("result", "partition", "required", "deadline", "timeout_ms")

    def __init__(self, result, partition, required: int, deadline: float, timeout_ms: int):
        self.result, self.partition, self.required = result, partition, required
        self.deadline, self.timeout_ms = deadline, timeout_ms


class Replicating:
    """An acks=all append waiting for its replicas: where to write the answer once it is settled."""
    __slots__ = ("result", "partition", "info", "epoch", "deadline")

    def __init__(self, result, partition, info, epoch: int, deadline: float):
        self.result, self.partition, self.info, self.epoch, self.deadline = result, partition, info, epoch, deadline

    def done(self) -> None:
        self.result.base_offset = self.info.first_offset
        self.result.log_append_time = self.info.log_append_time
        self.result.log_start_offset = self.partition.log.log_start_offset
