"""Consumer-group requests: protobuf in, :class:`GroupRuntime` operations, protobuf out."""
from __future__ import annotations

from collections.abc import Mapping

from broker.errors import (GroupIdNotFoundError, InvalidSessionTimeoutError, KafkaError, OffsetMetadataTooLargeError,
                           RiverlogError, StaleMemberEpochError, UnknownMemberIdError, UnknownTopicOrPartitionError)
from broker.group.group import LEAVE_STATIC, Committed
from broker.group.offset_fetch import NO_MEMBER_EPOCH, fetch_offsets
from broker.proto import riverlog_pb2 as pb
from broker.proto.partitions import add_results, grouped, pairs
from broker.server.group_runtime import GroupRuntime

DEAD = "Dead"  # the state Kafka's DescribeGroups gives a group that does not exist


def drop_unknown_partitions(image, offsets: Mapping, results) -> dict:
    """Kafka's ``handleOffsetCommitRequest`` / ``handleTxnOffsetCommitRequest``: a partition the
    metadata image does not have (unknown topic, or a partition number the topic lacks) is answered
    ``UNKNOWN_TOPIC_OR_PARTITION`` in ``results`` and stored nowhere, so a topic created later under
    the name is not read from offsets committed before it existed. Returns the offsets to commit."""
    known = {}
    for (topic, partition), committed in offsets.items():
        t = image.topics.get(topic)
        if t is not None and 0 <= partition < t.num_partitions:
            known[(topic, partition)] = committed
            continue
        error = UnknownTopicOrPartitionError(
            f"topic '{topic}' does not exist" if t is None else
            f"topic '{topic}' has {t.num_partitions} partitions; partition {partition} does not exist")
        add_results(results, [(topic, partition)], error)
    return known


def drop_oversized_metadata(offsets: Mapping, limit: int, results) -> dict:
    """Kafka's ``OffsetMetadataManager`` (``isMetadataInvalid``): an offset whose metadata is
    longer than ``offset.metadata.max.bytes`` is answered ``OFFSET_METADATA_TOO_LARGE`` for its
    partition and not written; the others are. Returns the offsets to commit."""
    kept = {}
    for tp, committed in offsets.items():
        size = len(committed.metadata.encode("utf-16-le")) // 2   # Java's String.length(): UTF-16 units
        if size > limit:
            add_results(results, [tp], OffsetMetadataTooLargeError(
                f"The metadata field of the offset request was too large: {size} characters "
                f"for {tp[0]}-{tp[1]}, at most {limit} (offset.metadata.max.bytes)"))
        else:
            kept[tp] = committed
    return kept


class GroupHandlers:
    def __init__(self, runtime: GroupRuntime):
        self.runtime = runtime
        self.config = runtime.config

    def heartbeat(self, request: pb.ConsumerGroupHeartbeatRequest,
                  client_host: str = "") -> pb.ConsumerGroupHeartbeatResponse:
        low, high = self.config["group.min.session.timeout.ms"], self.config["group.max.session.timeout.ms"]
        session = request.session_timeout_ms or 45_000
        if request.member_epoch >= 0 and not low <= session <= high:
            raise InvalidSessionTimeoutError(
                f"session.timeout.ms={session} is outside the broker's [{low}, {high}] "
                "(group.min.session.timeout.ms, group.max.session.timeout.ms)")
        now = self.runtime.broker.clock.time_ms()
        sizes = self.runtime.topic_sizes()
        fields = dict(instance_id=request.instance_id, client_id=request.client_id, client_host=client_host,
                      topics=list(request.subscribed_topics), assignor_name=request.assignor,
                      session_timeout_ms=session, rebalance_timeout_ms=request.rebalance_timeout_ms or 300_000,
                      owned=set(pairs(request.owned)), max_size=self.config["group.consumer.max.size"])
        result = self.runtime.run(request.group_id, lambda shard: shard.heartbeat_outcome(
            request.group_id, request.member_id, request.member_epoch, partitions=sizes, now_ms=now, **fields))
        if isinstance(result, RiverlogError):
            raise result  # after what the refusal changed was written
        interval = min(self.config["group.consumer.heartbeat.interval.ms"], max(10, session // 3))
        return pb.ConsumerGroupHeartbeatResponse(
            member_id=result.member_id, member_epoch=result.member_epoch, heartbeat_interval_ms=interval,
            assignment=grouped(result.assignment), reconciling=result.reconciling)

    def offset_commit(self, request: pb.OffsetCommitRequest) -> pb.OffsetCommitResponse:
        """As Kafka's ``OffsetMetadataManager.commitOffset``: the caller (group, member id, member
        epoch) is checked first, even when every offset's metadata is too large, and a refused
        caller gets its error on every partition the cluster has; then each offset whose metadata
        is too large is answered ``OFFSET_METADATA_TOO_LARGE`` and the others are written."""
        now = self.runtime.broker.clock.time_ms()
        offsets = {(t.name, p.partition): Committed(p.offset, p.metadata, p.leader_epoch, now)
                   for t in request.topics for p in t.partitions}
        response = pb.OffsetCommitResponse()
        offsets = drop_unknown_partitions(self.runtime.broker.image, offsets, response.results)
        if not offsets:
            return response
        refused = pb.OffsetCommitResponse()
        kept = drop_oversized_metadata(offsets, self.config["offset.metadata.max.bytes"], refused.results)
        try:
            self.runtime.run(request.group_id, lambda shard: (None, shard.commit(
                request.group_id, request.member_id, request.member_epoch, kept)))
        except RiverlogError as e:
            add_results(response.results, offsets, e)
            return response
        add_results(response.results, kept, None)
        response.results.extend(refused.results)
        return response

    def offset_fetch(self, request: pb.OffsetFetchRequest) -> pb.OffsetFetchResponse:
        """Committed offsets, once the caller was checked (:mod:`broker.group.offset_fetch`): a
        refused member gets a group-level ``UNKNOWN_MEMBER_ID`` or ``STALE_MEMBER_EPOCH`` and no
        offsets, as Kafka's OffsetFetch v9. With ``require_stable`` (KIP-447; read_committed
        consumers), a partition with offsets pending in an open transaction is answered
        ``UNSTABLE_OFFSET_COMMIT`` and no offset, as Kafka's ``OffsetMetadataManager.fetchOffsets``:
        its new owner must wait for that transaction to end instead of reading an offset the
        transaction is about to move (it would process those records again)."""
        wanted = pairs(request.partitions) or None
        epoch = request.member_epoch if request.HasField("member_epoch") else NO_MEMBER_EPOCH
        response = pb.OffsetFetchResponse()
        try:
            fetched = self.runtime.read(request.group_id, lambda shard: fetch_offsets(
                shard, request.group_id, request.member_id, epoch, wanted, request.require_stable))
        except (UnknownMemberIdError, StaleMemberEpochError) as e:
            response.error_code, response.error_message = e.code, e.message
            return response
        for (topic, partition) in sorted(fetched.unstable):
            response.offsets.add(topic=topic, partition=partition, offset=-1, leader_epoch=-1,
                                 error_code=KafkaError.UNSTABLE_OFFSET_COMMIT, error_message=(
                                     f"group '{request.group_id}' has offsets of {topic}-{partition} pending in "
                                     "an open transaction: retry once it ends"))
        for (topic, partition), c in sorted(fetched.offsets.items()):
            if (topic, partition) not in fetched.unstable:
                response.offsets.add(topic=topic, partition=partition, offset=c.offset, metadata=c.metadata,
                                     commit_timestamp=c.commit_timestamp, leader_epoch=c.leader_epoch)
        return response

    def list_groups(self, request: pb.ListGroupsRequest) -> pb.ListGroupsResponse:
        """The groups this broker coordinates, read from replicated state under each partition's
        lock (:meth:`GroupRuntime.read_all`); ``CoordinatorLoadInProgress`` while one of its
        partitions is loading, rather than a list missing that partition's groups."""
        response = pb.ListGroupsResponse()
        node = self.runtime.broker.node_id
        listed = self.runtime.read_all(lambda shard: [(g.group_id, g.state, "consumer" if g.assignor else "")
                                                      for g in shard.groups.values()])
        for group_id, state, protocol_type in sorted(row for groups in listed for row in groups):
            response.groups.add(group_id=group_id, state=state, coordinator=node, protocol_type=protocol_type)
        return response

    def describe_groups(self, request: pb.DescribeGroupsRequest) -> pb.DescribeGroupsResponse:
        response = pb.DescribeGroupsResponse()
        for group_id in request.group_ids:
            d = response.groups.add(group_id=group_id, coordinator=self.runtime.broker.node_id)
            try:
                self.runtime.read(group_id, lambda shard: self._describe(shard.describe(group_id), d))
            except GroupIdNotFoundError:
                d.state = DEAD  # Kafka's describeGroups: an unknown group is Dead, with no members
            except RiverlogError as e:
                d.error_code, d.error_message = e.code, e.message
        return response

    @staticmethod
    def _describe(group, d: pb.GroupDescription) -> None:
        """As Kafka's ``ConsumerGroup.asDescribedGroup``; a static member that left for now is
        described at epoch -2, the epoch Kafka records at its leave and the one OffsetCommit and
        OffsetFetch then expect of it, so it is told apart from a member that is consuming."""
        d.state, d.assignor = group.state, group.assignor
        d.group_epoch, d.assignment_epoch = group.group_epoch, group.assignment_epoch
        for m in sorted(group.members.values(), key=lambda m: (m.instance_id, m.member_id)):
            d.members.add(member_id=m.member_id, instance_id=m.instance_id, client_id=m.client_id,
                          client_host=m.client_host,
                          member_epoch=m.epoch if m.active else LEAVE_STATIC, subscribed_topics=m.topics,
                          assignment=grouped(m.assigned),
                          target=grouped(group.target.get(m.member_id, ())))

    def delete_groups(self, request: pb.DeleteGroupsRequest) -> pb.DeleteGroupsResponse:
        response = pb.DeleteGroupsResponse()
        for group_id in request.group_ids:
            r = response.results.add(group_id=group_id)
            try:
                self.runtime.run(group_id, lambda shard: (None, shard.delete_group(group_id)))
            except RiverlogError as e:
                r.error_code, r.error_message = e.code, e.message
        return response

    def offset_delete(self, request: pb.OffsetDeleteRequest) -> pb.OffsetDeleteResponse:
        """A group-level error (e.g. GROUP_ID_NOT_FOUND) on every partition; otherwise each
        partition's own outcome: ``UNKNOWN_TOPIC_OR_PARTITION`` for a topic or partition number
        the cluster does not have (Kafka's ``handleOffsetDeleteRequest``, before the coordinator,
        which still checks the group), GROUP_SUBSCRIBED_TO_TOPIC for a subscribed topic's."""
        tps = pairs(request.partitions)
        response, unknown = pb.OffsetDeleteResponse(), pb.OffsetDeleteResponse()
        known = list(drop_unknown_partitions(self.runtime.broker.image, dict.fromkeys(tps), unknown.results))
        try:
            errors = self.runtime.run(request.group_id, lambda shard: shard.delete_offsets(request.group_id, known))
        except RiverlogError as e:
            add_results(response.results, tps, e)
            return response
        for tp in known:
            add_results(response.results, [tp], errors.get(tp))
        response.results.extend(unknown.results)
        return response
