"""Consumer-group administration, mixed into :class:`AdminClient` (confluent-kafka's method names).

    admin.list_consumer_groups().result().valid                       # [ConsumerGroupListing]
    admin.describe_consumer_groups(["billing"])["billing"].result()   # ConsumerGroupDescription
    admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("billing")])["billing"].result()
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions("billing", [TopicPartition("orders", 0, 42)])])
    admin.delete_consumer_groups(["billing"])

Each group's requests go to its coordinator. A coordinator error in an answer's body (loading,
moved, not available) is retried until the call's timeout, finding the coordinator again when it
moved, as Java's admin handlers do (``DescribeConsumerGroupsHandler.handleError`` and its siblings):
a broker that just took a group over answers once it has loaded it. Altering offsets is refused
(``UnknownMemberIdError``, Kafka's answer) while the group has members, as Kafka refuses to reset a
running group. A group that does not exist is described as ``ConsumerGroupState.DEAD`` with no
members, as Kafka's DescribeGroups answers.
"""
from __future__ import annotations

import time
from concurrent.futures import Future
from dataclasses import dataclass, field

from broker.client.admin_arguments import check_options
from broker.client.admin_fan_out import _has_duplicate_partitions, _refused
from broker.client.coordinator import CoordinatorClient
from broker.client.group_admin_arguments import (_check_alter_request, _check_filter, _check_group_ids,
                                                 _check_list_request)
from broker.client.message import OFFSET_INVALID, TopicPartition, _rebuild_topic_partition
from broker.client.model import GROUP_OPERATIONS, ConsumerGroupState, ConsumerGroupType, Node, authorized
from broker.errors import (CoordinatorLoadInProgressError, CoordinatorNotAvailableError, GroupSubscribedToTopicError,
                           KafkaError, NotCoordinatorError, RiverlogError, UnknownTopicOrPartitionError,
                           error_for_code)
from broker.proto import riverlog_pb2 as pb
from broker.proto.partitions import grouped


@dataclass
class ConsumerGroupListing:
    """``state`` is a :class:`ConsumerGroupState` (also equal to the broker's name, e.g. "Stable")."""
    group_id: str
    is_simple_consumer_group: bool
    state: ConsumerGroupState
    type: ConsumerGroupType = ConsumerGroupType.CONSUMER
    coordinator: int = -1   # Riverlog's: the coordinator's node id

    def __post_init__(self):
        if isinstance(self.state, str):
            self.state = ConsumerGroupState.of(self.state)


@dataclass
class ListConsumerGroupsResult:
    valid: list[ConsumerGroupListing] = field(default_factory=list)
    errors: list[RiverlogError] = field(default_factory=list)


@dataclass
class MemberAssignment:
    topic_partitions: list[TopicPartition]


@dataclass
class MemberDescription:
    """confluent-kafka's fields in its order; ``member_epoch`` (KIP-848's) is Riverlog's, last."""
    member_id: str
    client_id: str
    host: str
    assignment: MemberAssignment
    group_instance_id: str | None = None
    target_assignment: MemberAssignment | None = None
    member_epoch: int = -1


class GroupCoordinator(Node):
    """A group's coordinator in :class:`ConsumerGroupDescription`: confluent-kafka's ``Node``
    (``coordinator.id``, ``.host``, ``.port``). It also equals, hashes and formats as its node id,
    so lookups keyed by node id (``brokers[desc.coordinator]``) and ``f"({desc.coordinator})"``
    (Kafka's ``COORDINATOR (ID)`` column) read the id."""

    def __eq__(self, other):
        if isinstance(other, int) and not isinstance(other, bool):
            return self.id == other
        if isinstance(other, Node):
            return (self.id, self.host, self.port) == (other.id, other.host, other.port)
        return NotImplemented

    def __hash__(self):
        return hash(self.id)

    def __int__(self):
        return self.id

    __index__ = __int__

    def __str__(self):
        return self.id_string

    @classmethod
    def of(cls, node_id: int, brokers: dict[int, str]) -> "GroupCoordinator":
        """The node ``node_id`` at its address in ``brokers`` (``host:port``), or without one."""
        host, _, port = brokers.get(node_id, "").rpartition(":")
        return cls(node_id, host, int(port) if port.isdigit() else -1)


@dataclass
class ConsumerGroupDescription:
    """confluent-kafka's fields in its order (the epochs, KIP-848's, are Riverlog's, last);
    ``coordinator`` is the group's coordinator as a :class:`GroupCoordinator` node, as
    confluent-kafka gives it (``desc.coordinator.host``)."""
    group_id: str
    is_simple_consumer_group: bool
    members: list[MemberDescription]
    partition_assignor: str
    state: str
    coordinator: GroupCoordinator
    authorized_operations: list | None = None  # asked for: every group operation (no authorizer)
    type: ConsumerGroupType = ConsumerGroupType.CONSUMER
    group_epoch: int = -1
    assignment_epoch: int = -1

    def __post_init__(self):
        if isinstance(self.state, str):
            self.state = ConsumerGroupState.of(self.state)


@dataclass
class GroupMember:
    """A member in :meth:`ConsumerGroupAdmin.list_groups` (confluent-kafka's deprecated shape).
    ``metadata``/``assignment`` are the classic protocol's opaque bytes, which Riverlog's groups
    (Kafka's new protocol) do not have: they are empty; ``describe_consumer_groups`` gives the
    assignment as partitions."""
    id: str
    client_id: str
    client_host: str
    metadata: bytes = b""
    assignment: bytes = b""


@dataclass
class GroupMetadata:
    """A group in :meth:`ConsumerGroupAdmin.list_groups`; ``broker`` is its coordinator."""
    broker: object
    id: str
    error: object
    state: str
    protocol_type: str
    protocol: str
    members: list[GroupMember] = field(default_factory=list)

    def __repr__(self):
        return f"GroupMetadata({self.id})"


@dataclass
class ConsumerGroupTopicPartitions:
    group_id: str
    topic_partitions: list[TopicPartition] | None = None


def _committed(o: pb.CommittedOffset) -> TopicPartition:
    """One partition of an OffsetFetch answer, its error (UNSTABLE_OFFSET_COMMIT) on the partition."""
    error = KafkaError(o.error_code, o.error_message) if o.error_code else None
    offset = OFFSET_INVALID if o.error_code else o.offset
    return _rebuild_topic_partition(o.topic, o.partition, offset, o.metadata or None,
                                    o.leader_epoch if o.leader_epoch >= 0 else None, error)


def _tps(groups) -> list[TopicPartition]:
    return [TopicPartition(g.topic, p) for g in groups for p in g.partitions]


# The OffsetDelete codes that are one partition's outcome, not the group's (Kafka's
# DeleteConsumerGroupOffsetsHandler reads these per partition and the rest from the group).
_PARTITION_ERRORS = frozenset({GroupSubscribedToTopicError.code, UnknownTopicOrPartitionError.code})


_COORDINATOR_ERRORS = (CoordinatorLoadInProgressError, CoordinatorNotAvailableError, NotCoordinatorError)
_MOVED = (CoordinatorNotAvailableError, NotCoordinatorError)


def _coordinator_error(results) -> RiverlogError | None:
    """The first coordinator error (loading, moved, not available) among ``results``' codes."""
    for r in results:
        if r.error_code:
            error = error_for_code(r.error_code)(r.error_message)
            if isinstance(error, _COORDINATOR_ERRORS):
                return error
    return None


class ConsumerGroupAdmin:
    """Needs ``self.cluster`` and ``self._fan_out`` (from AdminClient)."""

    def _coordinator(self, group_id: str) -> CoordinatorClient:
        return CoordinatorClient(self.cluster, group_id)

    def _call_group(self, coordinator: CoordinatorClient, method: str, request, timeout: float | None, results):
        """``method`` on the group's coordinator, retried while ``results(response)`` carries a
        coordinator error (loading: the same broker again; moved or not available: find it again),
        until ``timeout``; then that error is the answer, as it is for errors the call raises."""
        deadline = time.monotonic() + (self.cluster.timeout if timeout is None else timeout)
        while True:
            response = coordinator.call(method, request, max(0.1, deadline - time.monotonic()))
            error = _coordinator_error(results(response))
            if error is None:
                return response
            if isinstance(error, _MOVED):
                coordinator.forget()
            if time.monotonic() + self.cluster.backoff >= deadline:
                raise error
            time.sleep(self.cluster.backoff)

    def _coordinator_node(self, node_id: int, timeout: float | None) -> GroupCoordinator:
        """The coordinator at its address, the brokers' list fetched when it is not known yet (an
        admin client that has only asked coordinators has none); without it, no address."""
        if node_id not in self.cluster.brokers:
            try:
                self.cluster.refresh(topics=[], timeout=timeout)
            except RiverlogError:
                pass
        return GroupCoordinator.of(node_id, self.cluster.brokers)

    def _per_group(self, group_ids, fn, request_timeout) -> dict[str, Future]:
        check_options(False, request_timeout)   # confluent-kafka's: 0..3600 s, a ValueError at the call
        def call():
            out = {}
            for group_id in group_ids:
                try:
                    out[group_id] = fn(group_id, self._coordinator(group_id), request_timeout)
                except RiverlogError as e:
                    out[group_id] = e
            return out
        return self._fan_out(list(group_ids), call, lambda results: results.items())

    def list_consumer_groups(self, request_timeout: float | None = None, states=None, types=None) -> Future:
        """Every group of every broker (each lists the groups it coordinates); ``states``/``types``
        (sets of ConsumerGroupState/ConsumerGroupType; anything else a TypeError at the call, as
        confluent-kafka's) keep only the groups in them."""
        check_options(False, request_timeout)
        states = _check_filter(states, ConsumerGroupState, "states")
        types = _check_filter(types, ConsumerGroupType, "types")
        def call():
            self.cluster.refresh(all_topics=False, topics=[])
            result, seen = ListConsumerGroupsResult(), set()
            for node in sorted(self.cluster.brokers):
                try:
                    response = self.cluster.call("ListGroups", pb.ListGroupsRequest(), node, request_timeout)
                except RiverlogError as e:
                    result.errors.append(e)
                    continue
                for g in response.groups:
                    # Kafka's and librdkafka's rule: simple when the group has no protocol type
                    listing = ConsumerGroupListing(g.group_id, not g.protocol_type, g.state, coordinator=g.coordinator)
                    if g.group_id not in seen and (not states or listing.state in states) \
                            and (not types or listing.type in types):
                        seen.add(g.group_id)
                        result.valid.append(listing)
            result.valid.sort(key=lambda g: g.group_id)
            return [("groups", result)]
        return self._fan_out(["groups"], call, lambda r: r)["groups"]

    def list_groups(self, group: str | None = None, timeout: float = -1) -> list[GroupMetadata]:
        """confluent-kafka's older, blocking group listing (``list_consumer_groups`` and
        ``describe_consumer_groups`` are the current calls): every group, or only ``group``."""
        from broker.client.cluster import BrokerMetadata
        wait = None if timeout is None or timeout < 0 else timeout
        ids = [group] if group else [g.group_id for g in self.list_consumer_groups().result(wait).valid]
        out = []
        for group_id, future in self.describe_consumer_groups(ids).items():
            try:
                d = future.result(wait)
            except RiverlogError as e:
                out.append(GroupMetadata(None, group_id, e.args[0], "Unknown", "consumer", ""))
                continue
            broker = BrokerMetadata(d.coordinator.id, self.cluster.brokers.get(d.coordinator.id, ""))
            out.append(GroupMetadata(broker, group_id, None, str(d.state), "consumer", d.partition_assignor,
                                     [GroupMember(m.member_id, m.client_id, m.host) for m in d.members]))
        return out

    def describe_consumer_groups(self, group_ids: list[str], request_timeout: float | None = None,
                                 include_authorized_operations: bool = False) -> dict[str, Future]:
        group_ids = _check_group_ids(group_ids, "described")
        if len(set(group_ids)) != len(group_ids):   # librdkafka's rd_kafka_DescribeConsumerGroups
            return _refused(dict.fromkeys(group_ids), "Duplicate groups not allowed")

        def describe(group_id, coordinator, timeout):
            response = self._call_group(coordinator, "DescribeGroups", pb.DescribeGroupsRequest(group_ids=[group_id]),
                                        timeout, lambda r: r.groups)
            d = response.groups[0]
            if d.error_code:
                return error_for_code(d.error_code)(d.error_message)
            members = [MemberDescription(m.member_id, m.client_id, m.client_host, MemberAssignment(_tps(m.assignment)),
                                         m.instance_id or None, MemberAssignment(_tps(m.target)), m.member_epoch)
                       for m in d.members]
            return ConsumerGroupDescription(d.group_id, not d.assignor, members, d.assignor, d.state,
                                            self._coordinator_node(d.coordinator, timeout),
                                            authorized(GROUP_OPERATIONS, include_authorized_operations),
                                            group_epoch=d.group_epoch, assignment_epoch=d.assignment_epoch)
        return self._per_group(group_ids, describe, request_timeout)

    def delete_consumer_groups(self, group_ids: list[str], request_timeout: float | None = None) -> dict[str, Future]:
        """Delete empty groups and their offsets (``NonEmptyGroupError`` while members remain)."""
        group_ids = _check_group_ids(group_ids, "deleted")
        if len(set(group_ids)) != len(group_ids):   # librdkafka's rd_kafka_DeleteGroups
            return _refused(dict.fromkeys(group_ids), "Duplicate groups not allowed")

        def delete(group_id, coordinator, timeout):
            r = self._call_group(coordinator, "DeleteGroups", pb.DeleteGroupsRequest(group_ids=[group_id]), timeout,
                                 lambda r: r.results).results[0]
            return error_for_code(r.error_code)(r.error_message) if r.error_code else None
        return self._per_group(group_ids, delete, request_timeout)

    def list_consumer_group_offsets(self, requests: list[ConsumerGroupTopicPartitions],
                                    request_timeout: float | None = None, require_stable: bool = False
                                    ) -> dict[str, Future]:
        """Committed offsets (all of the group's, or the listed partitions') per group. Every listed
        partition is answered, with ``OFFSET_INVALID`` where the group has committed nothing (as
        confluent-kafka and Kafka's OffsetFetch), and the leader epoch it was committed with.
        Offsets committed in a transaction show once it commits. With ``require_stable`` (KIP-447),
        a partition whose offset an open transaction holds comes back with ``OFFSET_INVALID`` and
        ``error`` UNSTABLE_OFFSET_COMMIT, as librdkafka's ListConsumerGroupOffsets gives it,
        instead of the offset that transaction is about to replace.
        Checked first as confluent-kafka checks (``topic_partitions`` None or a non-empty list of
        partitions without offsets); a partition listed twice fails the call with ``_INVALID_ARG``,
        as librdkafka's."""
        _check_list_request(requests)
        wanted = {r.group_id: r.topic_partitions for r in requests}
        if any(_has_duplicate_partitions(r.topic_partitions or []) for r in requests):
            return _refused(list(wanted), "Duplicate partitions not allowed")

        def fetch(group_id, coordinator, timeout):
            request = pb.OffsetFetchRequest(group_id=group_id, partitions=grouped(wanted[group_id] or []),
                                            require_stable=require_stable)
            response = coordinator.call("OffsetFetch", request, timeout)
            if response.error_code:   # the group-level answer (KIP-848's reader checks; none for an admin)
                raise error_for_code(response.error_code)(response.error_message)
            found = {(o.topic, o.partition): _committed(o) for o in response.offsets}
            for tp in wanted[group_id] or []:
                found.setdefault((tp.topic, tp.partition), TopicPartition(tp.topic, tp.partition, OFFSET_INVALID))
            return ConsumerGroupTopicPartitions(group_id, sorted(found.values()))
        return self._per_group(list(wanted), fetch, request_timeout)

    def alter_consumer_group_offsets(self, requests: list[ConsumerGroupTopicPartitions],
                                     request_timeout: float | None = None) -> dict[str, Future]:
        """Set committed offsets. Checked first as confluent-kafka checks (``ValueError`` for an
        empty list or a negative offset). The group's future resolves to a
        ConsumerGroupTopicPartitions with one TopicPartition per requested partition, whose
        ``error`` is None where the offset was committed and a KafkaError where the coordinator
        refused it — ``UNKNOWN_TOPIC_OR_PART`` for a partition the cluster does not have (not
        stored, the others committed), ``UNKNOWN_MEMBER_ID`` on every partition while the group has
        active members — as librdkafka answers OffsetCommit per partition and leaves the group's
        result without an error (check each ``tp.error``, as Kafka's ``all()`` does for Java). A
        coordinator that stays unavailable or loading until the timeout fails the future. A
        partition listed twice fails the call with ``_INVALID_ARG`` ("Duplicate partitions not
        allowed"), nothing sent, as librdkafka's ``rd_kafka_AlterConsumerGroupOffsets``."""
        _check_alter_request(requests)
        wanted = {r.group_id: r.topic_partitions for r in requests}
        if any(_has_duplicate_partitions(r.topic_partitions) for r in requests):   # which offset was meant?
            return _refused(list(wanted), "Duplicate partitions not allowed")

        def alter(group_id, coordinator, timeout):
            by_topic: dict[str, list] = {}
            for tp in wanted[group_id]:
                by_topic.setdefault(tp.topic, []).append(pb.CommitPartition(
                    partition=tp.partition, offset=tp.offset, metadata=tp.metadata or "",
                    leader_epoch=-1 if tp.leader_epoch is None else tp.leader_epoch))
            request = pb.OffsetCommitRequest(group_id=group_id, member_id="", member_epoch=-1, topics=[
                pb.CommitTopic(name=t, partitions=ps) for t, ps in by_topic.items()])
            results = self._call_group(coordinator, "OffsetCommit", request, timeout, lambda r: r.results).results
            errors = {(r.topic, r.partition): error_for_code(r.error_code)(r.error_message)
                      for r in results if r.error_code}
            return ConsumerGroupTopicPartitions(group_id, [
                _rebuild_topic_partition(tp.topic, tp.partition, tp.offset, tp.metadata, tp.leader_epoch,
                                         KafkaError.of(errors.get((tp.topic, tp.partition))))
                for tp in sorted(wanted[group_id])])
        return self._per_group(list(wanted), alter, request_timeout)

    def delete_consumer_group_offsets(self, group_id: str, partitions: list[TopicPartition],
                                      request_timeout: float | None = None) -> Future:
        """Forget a group's offsets of topics it no longer consumes. The future's result is a
        ConsumerGroupTopicPartitions with one TopicPartition per requested partition, whose
        ``error`` is None where the offset was deleted (or there was none) and a KafkaError where the
        partition failed: ``GROUP_SUBSCRIBED_TO_TOPIC`` for a topic a member still subscribes to,
        while the other partitions' offsets are deleted (Kafka's ``OffsetMetadataManager.deleteOffsets``
        and ``DeleteConsumerGroupOffsetsResult.partitionResult``). A group-level error
        (``GroupIdNotFoundError``, ...) fails the future and deletes nothing."""
        def delete(group_id, coordinator, timeout):
            request = pb.OffsetDeleteRequest(group_id=group_id, partitions=grouped(partitions))
            results = self._call_group(coordinator, "OffsetDelete", request, timeout, lambda r: r.results).results
            group_error = next((r for r in results if r.error_code and r.error_code not in _PARTITION_ERRORS), None)
            if group_error is not None:
                raise error_for_code(group_error.error_code)(group_error.error_message)
            errors = {(r.topic, r.partition): error_for_code(r.error_code)(r.error_message)
                      for r in results if r.error_code}
            return ConsumerGroupTopicPartitions(group_id, [
                _rebuild_topic_partition(tp.topic, tp.partition, tp.offset, tp.metadata, tp.leader_epoch,
                                         KafkaError.of(errors.get((tp.topic, tp.partition))))
                for tp in sorted(partitions)])
        return self._per_group([group_id], delete, request_timeout)[group_id]
