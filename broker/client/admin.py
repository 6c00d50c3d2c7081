"""The admin client: topics, configs and offsets, returning futures as confluent-kafka does.

    admin = AdminClient({"bootstrap.servers": "127.0.0.1:9092"})
    fs = admin.create_topics([NewTopic("orders", num_partitions=3, replication_factor=1)])
    fs["orders"].result()        # None, or raises the typed error (e.g. TopicAlreadyExistsError)

The calls are split by concept: ``topic_admin.py``, ``config_admin.py``, ``records_admin.py``,
``group_admin.py``, ``txn_admin.py`` and ``admin_abort.py`` are mixed into :class:`AdminClient`;
``admin_fan_out.py`` runs each call on the client's worker thread and completes its futures.
"""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from broker.client.admin_abort import AbortTransactionAdmin, AbortTransactionSpec  # noqa: F401 - Kafka's spec
from broker.client.admin_arguments import (check_items, check_new_partitions, check_new_topic, check_options,
                                           check_topic_names)
from broker.client.admin_fan_out import AdminFanOut, _error, _has_duplicate_partitions, _refused
from broker.client.cluster import BrokerMetadata, ClusterClient, ClusterMetadata
from broker.client.cluster import PartitionInfo as PartitionMetadata
from broker.client.cluster import TopicInfo as TopicMetadata
from broker.client.client_events import ClientEvents
from broker.client.config import ADMIN_CONFIG, client_config
from broker.client.config_admin import (CONFIG_SOURCE_DEFAULT_CONFIG, CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG,
                                        CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG,
                                        CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG, CONFIG_SOURCE_GROUP_CONFIG,
                                        CONFIG_SOURCE_STATIC_BROKER_CONFIG, CONFIG_SOURCE_UNKNOWN_CONFIG,
                                        RESOURCE_ANY, RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_TOPIC,
                                        RESOURCE_TRANSACTIONAL_ID, RESOURCE_UNKNOWN, AlterConfigOpType, ConfigAdmin,
                                        ConfigEntry, ConfigResource, ConfigSource, ResourceType)
from broker.client.group_admin import (ConsumerGroupAdmin, ConsumerGroupDescription, ConsumerGroupListing,
                                       ConsumerGroupTopicPartitions, GroupMember, GroupMetadata,
                                       ListConsumerGroupsResult, MemberAssignment, MemberDescription)
from broker.client.message import OFFSET_INVALID, TopicPartition
from broker.client.model import (CLUSTER_OPERATIONS, ConsumerGroupState, ConsumerGroupType, ElectionType,
                                 IsolationLevel, Node, TopicCollection, TopicDescription, TopicPartitionInfo,
                                 authorized)
from broker.client.records_admin import DeletedRecords, ListOffsetsResultInfo, OffsetSpec, RecordsAdmin
from broker.client.replica_assignment import partition_assignments, topic_assignments
from broker.client.topic_admin import TopicAdmin
from broker.client.txn_admin import TransactionAdmin
from broker.errors import KafkaError, KafkaException
from broker.proto import riverlog_pb2 as pb

__all__ = [  # confluent_kafka.admin's names that Riverlog has
    "AdminClient", "AlterConfigOpType", "BrokerMetadata", "ClusterMetadata", "ConfigEntry", "ConfigResource",
    "ConfigSource", "ConsumerGroupDescription", "ConsumerGroupListing", "ConsumerGroupState",
    "ConsumerGroupTopicPartitions", "ConsumerGroupType", "DeletedRecords", "DescribeClusterResult", "ElectionType",
    "GroupMember", "GroupMetadata", "IsolationLevel", "ListConsumerGroupsResult", "ListOffsetsResultInfo",
    "MemberAssignment", "MemberDescription", "NewPartitions", "NewTopic", "Node", "OffsetSpec", "PartitionMetadata",
    "ResourceType", "TopicCollection", "TopicDescription", "TopicMetadata", "TopicPartition", "TopicPartitionInfo",
    "KafkaError", "KafkaException", "OFFSET_INVALID", "CONFIG_SOURCE_UNKNOWN_CONFIG", "CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG",
    "CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG", "CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG",
    "CONFIG_SOURCE_STATIC_BROKER_CONFIG", "CONFIG_SOURCE_DEFAULT_CONFIG", "CONFIG_SOURCE_GROUP_CONFIG",
    "RESOURCE_UNKNOWN", "RESOURCE_ANY", "RESOURCE_TOPIC", "RESOURCE_GROUP", "RESOURCE_BROKER", "RESOURCE_TRANSACTIONAL_ID",
]


class NewTopic:
    """A topic to create, in confluent-kafka's argument order (``topic, num_partitions,
    replication_factor, replica_assignment, config``); a dict in the fourth place is read as
    ``config``. Without ``replica_assignment`` (one broker list per partition, the preferred
    leader first; then ``num_partitions`` is its length and no ``replication_factor``) the
    controller places the replicas."""

    def __init__(self, topic: str, num_partitions: int = -1, replication_factor: int = -1,
                 replica_assignment=None, config: dict | None = None):
        if isinstance(replica_assignment, dict) and config is None:
            replica_assignment, config = None, replica_assignment
        if not isinstance(topic, str):
            raise TypeError(f"NewTopic's topic must be a str, not {type(topic).__name__}")
        if config is not None and not isinstance(config, dict):
            raise TypeError("config must be a dict of strings")
        self.topic, self.num_partitions, self.replication_factor = topic, num_partitions, replication_factor
        self.replica_assignment = replica_assignment
        self.config = dict(config or {})

    def __eq__(self, other):
        return isinstance(other, NewTopic) and (self.topic, self.num_partitions, self.replication_factor,
                                                self.replica_assignment, self.config) == \
            (other.topic, other.num_partitions, other.replication_factor, other.replica_assignment, other.config)

    def __hash__(self):
        return hash(self.topic)

    def __repr__(self):
        return f"NewTopic(topic={self.topic},num_partitions={self.num_partitions})"


class NewPartitions:
    """Grow ``topic`` to ``new_total_count`` partitions (confluent-kafka's names), with a
    ``replica_assignment`` of one broker list per partition added, or placed by the controller."""

    def __init__(self, topic: str, new_total_count: int, replica_assignment=None):
        self.topic, self.new_total_count, self.replica_assignment = topic, new_total_count, replica_assignment

    def __eq__(self, other):
        return isinstance(other, NewPartitions) and \
            (self.topic, self.new_total_count, self.replica_assignment) == \
            (other.topic, other.new_total_count, other.replica_assignment)

    def __hash__(self):
        return hash(self.topic)

    def __repr__(self):
        return f"NewPartitions(topic={self.topic},new_total_count={self.new_total_count})"


def _check_elect_partitions(partitions) -> None:
    """confluent-kafka's ``_check_elect_leaders`` for the partitions (None: every partition)."""
    if partitions is None:
        return
    if not isinstance(partitions, list):
        raise TypeError(f"Expected 'partitions' to be a list, got '{type(partitions).__name__}'")
    for tp in partitions:
        if not isinstance(tp, TopicPartition):
            raise TypeError(f"Element of the 'partitions' list must be of type 'TopicPartition' got "
                            f"'{type(tp).__name__}'")
        if tp.partition < 0:
            raise ValueError("Elements of the 'partitions' list must not have negative value for 'partition' field")


@dataclass
class DescribeClusterResult:
    cluster_id: str
    controller: Node | None
    nodes: list[Node]
    metadata_offset: int = -1
    authorized_operations: list | None = None


class AdminClient(ConsumerGroupAdmin, AbortTransactionAdmin, TransactionAdmin, TopicAdmin, ConfigAdmin, RecordsAdmin,
                  AdminFanOut):
    """Topics, partitions, configs, offsets, groups and transactions, as confluent-kafka's
    ``AdminClient``: every call returns futures at once and runs in the background, in the order
    the calls were made.

        with AdminClient({"bootstrap.servers": "127.0.0.1:9092"}) as admin:
            admin.create_topics([NewTopic("orders", 3)])["orders"].result()
            print(admin.list_topics().topics["orders"].partitions[0].leader)
    """

    _closed = True  # until __init__ ran: a subclass that skipped it has no client to call

    def __init__(self, config: dict | None = None, **kwargs):
        cfg = client_config(ADMIN_CONFIG, config, kwargs)
        self.config = cfg
        self._events = ClientEvents(cfg, "admin")
        self.cluster = ClusterClient.from_config(cfg, self._events.error)
        # One worker: calls reach the brokers in the order they were made (delete_records then
        # list_offsets sees the new low watermark), as with confluent-kafka's AdminClient. A call
        # that waits (retrying while leadership moves) delays the ones made after it.
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="riverlog-admin")
        self._closed = False

    def create_topics(self, new_topics: list[NewTopic], validate_only: bool = False,
                      operation_timeout: float = 30, request_timeout: float | None = None) -> dict[str, Future]:
        """A future per topic. Arguments are checked here as confluent-kafka checks them (a list of
        NewTopic, a bool ``validate_only``, timeouts of 0..3600 s): TypeError/ValueError at the call."""
        new_topics = check_items(new_topics, NewTopic, "NewTopic objects")
        check_options(validate_only, request_timeout, operation_timeout)
        for t in new_topics:
            check_new_topic(t)
        assignments = [topic_assignments(t) for t in new_topics]
        request = pb.CreateTopicsRequest(validate_only=validate_only, topics=[
            pb.CreatableTopic(name=t.topic, num_partitions=-1 if a else t.num_partitions,
                              replication_factor=t.replication_factor, assignments=a,
                              configs={k: str(v) for k, v in t.config.items()})
            for t, a in zip(new_topics, assignments)])
        return self._fan_out([t.topic for t in new_topics],
                             lambda: self.cluster.call_any("CreateTopics", request, request_timeout),
                             lambda r: ((x.name, _error(x.error_code, x.error_message) if x.error_code else None)
                                        for x in r.results))

    def delete_topics(self, topics: list[str], operation_timeout: float = 30,
                      request_timeout: float | None = None) -> dict[str, Future]:
        """A future per topic name; ``topics`` must be a list of str (a str alone is a TypeError)."""
        topics = check_topic_names(topics)
        check_options(False, request_timeout, operation_timeout)
        request = pb.DeleteTopicsRequest(topics=topics)
        return self._fan_out(topics, lambda: self.cluster.call_any("DeleteTopics", request, request_timeout),
                             lambda r: ((x.name, _error(x.error_code, x.error_message) if x.error_code else None)
                                        for x in r.results))

    def create_partitions(self, new_partitions: list[NewPartitions], validate_only: bool = False,
                          operation_timeout: float = 30, request_timeout: float | None = None) -> dict[str, Future]:
        """A future per topic. Checked here as confluent-kafka checks (a total of 1..100000
        partitions, else ValueError); a total that is not an increase fails the topic's future
        with InvalidPartitionsError."""
        new_partitions = check_items(new_partitions, NewPartitions, "NewPartitions objects")
        check_options(validate_only, request_timeout, operation_timeout)
        for p in new_partitions:
            check_new_partitions(p)
        request = pb.CreatePartitionsRequest(validate_only=validate_only, topics=[
            pb.CreatePartitionsTopic(name=p.topic, count=p.new_total_count, assignments=partition_assignments(p))
            for p in new_partitions])
        return self._fan_out([p.topic for p in new_partitions],
                             lambda: self.cluster.call_any("CreatePartitions", request, request_timeout),
                             lambda r: ((x.name, _error(x.error_code, x.error_message) if x.error_code else None)
                                        for x in r.results))

    def elect_leaders(self, topic, partitions=None, request_timeout: float | None = None) -> Future:
        """confluent-kafka's ``elect_leaders(ElectionType, [TopicPartition, ...] | None)``: a future
        of ``{TopicPartition: KafkaException | None}`` with Kafka's per-partition errors. PREFERRED
        moves leadership back to each partition's preferred (first) replica where it is in sync
        (ELECTION_NOT_NEEDED when it leads already, PREFERRED_LEADER_NOT_AVAILABLE); UNCLEAN gives
        a leaderless partition a live replica even out of the ISR (ELECTION_NOT_NEEDED when it
        has a leader, ELIGIBLE_LEADERS_NOT_AVAILABLE when no replica is live); both
        UNKNOWN_TOPIC_OR_PARTITION. None partitions: every partition of every topic, leaving out
        those that needed no election, as Kafka's ``electLeaders``. One request per topic.
        ``elect_leaders(topic, [partition, ...])`` is Riverlog's own: one future for the topic's
        preferred election, failing only when no partition was elected. The partitions are checked
        as confluent-kafka checks them (a list of TopicPartition, none negative: TypeError,
        ValueError); one named twice fails the future with ``_INVALID_ARG``, as librdkafka's."""
        self._check_open()
        check_options(False, request_timeout)
        if isinstance(topic, ElectionType):
            _check_elect_partitions(partitions)
            if partitions is not None and _has_duplicate_partitions(partitions):
                return _refused(["elect"], "Duplicate partitions specified")["elect"]
            return self._elect(topic, partitions, request_timeout)
        request = pb.ElectLeadersRequest(topic=topic, partitions=partitions or [])
        return self._fan_out([topic], lambda: self.cluster.call_any("ElectLeaders", request, request_timeout),
                             lambda r: [(topic, _error(r.error_code, r.error_message) if r.error_code else None)])[topic]

    def _elect(self, election_type: ElectionType, partitions, request_timeout) -> Future:
        election = ElectionType(election_type)
        result: Future = Future()

        def run():
            try:
                if partitions is None:
                    topics = {t: None for t in sorted(self.list_topics(timeout=request_timeout or 30).topics)}
                else:
                    topics = {}
                    for tp in dict.fromkeys(partitions):
                        topics.setdefault(tp.topic, []).append(tp.partition)
                out = {}
                for name, asked in topics.items():     # called here: this runs on the pool already
                    try:
                        r = self.cluster.call_any("ElectLeaders", pb.ElectLeadersRequest(
                            topic=name, partitions=asked or [], election_type=election.value), request_timeout)
                    except KafkaException as e:       # reported per partition, as confluent's result
                        out.update({TopicPartition(name, p): e for p in asked or []})
                        continue
                    failed = {e.partition: _error(e.error_code, e.error_message) for e in r.errors}
                    if r.error_code and not r.errors:   # the topic's own error (unknown topic)
                        failed = {p: _error(r.error_code, r.error_message) for p in asked or []}
                    for p in (asked if asked is not None else sorted(set(r.elected) | set(failed))):
                        out[TopicPartition(name, p)] = failed.get(p)
                result.set_result(out)
            except Exception as e:  # noqa: BLE001 - the future carries it
                result.set_exception(e)

        self._pool.submit(run)
        return result

    def describe_cluster(self, request_timeout: float | None = None, include_authorized_operations: bool = False,
                         include_fenced_brokers: bool = False, include_controllers: bool = False) -> Future:
        """A future of :class:`DescribeClusterResult`: nodes, the active controller, the cluster id.

        ``nodes`` are the brokers that serve clients, as Kafka's DescribeCluster answers
        (``getAliveBrokerNodes``: fenced brokers and controller-only nodes left out), so code that
        counts brokers counts what it can use. ``include_fenced_brokers`` adds fenced brokers
        (KIP-1073's ``DescribeClusterOptions.includeFencedBrokers``); ``include_controllers`` (Riverlog's)
        adds the controller quorum's voters, for ``riverlog cluster status``. ``controller`` is the
        active controller even when it is a controller-only node. With ``include_authorized_operations``,
        ``authorized_operations`` lists every cluster operation: Riverlog has no authorizer, and
        Kafka's brokers without one grant them all."""
        check_options(False, request_timeout)
        def wanted(n) -> bool:
            return (n.broker and (include_fenced_brokers or not n.fenced)) or (include_controllers and n.voter)

        def split(r):
            every = [Node(n.node_id, n.host, n.port, fenced=n.fenced, voter=n.voter, broker=n.broker) for n in r.nodes]
            controller = next((n for n in every if n.id == r.controller_id), None)
            nodes = [n for n in every if wanted(n)]
            return [("cluster", DescribeClusterResult(r.cluster_id, controller, nodes, r.metadata_offset,
                                                      authorized(CLUSTER_OPERATIONS, include_authorized_operations)))]
        return self._fan_out(["cluster"], lambda: self.cluster.call_any("DescribeCluster", pb.DescribeClusterRequest(),
                                                                        request_timeout), split)["cluster"]

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        self._check_open()
        return self.cluster.snapshot([topic] if topic else None, None if timeout < 0 else timeout)

    def poll(self, timeout: float | None = None) -> int:
        """Serve ``error_cb``/``stats_cb`` (results come as futures, so there is nothing else to serve)."""
        return self._events.serve()

    def close(self) -> None:
        """Wait for the calls made, then close; every call after it raises ``RuntimeError("AdminClient
        has been closed")`` (confluent-kafka's)."""
        if self._closed:
            return
        self._closed = True
        self._pool.shutdown(wait=True)
        self.cluster.close()
        self._events.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
