"""The admin client: topics, configs and offsets, returning futures as confluent-kafka does.

    admin = AdminClient({"bootstrap.servers": "127.0.0.1:9092"})
    fs = admin.create_topics([NewTopic("orders", num_partitions=3, replication_factor=1)])
    fs["orders"].result()        # None, or raises the typed error (e.g. TopicAlreadyExistsError)
"""
from __future__ import annotations

import enum
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from broker.client.cluster import BrokerMetadata, ClusterClient, ClusterMetadata
from broker.client.cluster import PartitionInfo as PartitionMetadata
from broker.client.cluster import TopicInfo as TopicMetadata
from broker.client.client_events import ClientEvents
from broker.client.config import ADMIN_CONFIG, client_config
from broker.client.group_admin import (ConsumerGroupAdmin, ConsumerGroupDescription, ConsumerGroupListing,
                                       ConsumerGroupTopicPartitions, GroupMember, GroupMetadata,
                                       ListConsumerGroupsResult, MemberAssignment, MemberDescription)
from broker.client.message import OFFSET_INVALID, TopicPartition
from broker.client.model import (ConsumerGroupState, ConsumerGroupType, ElectionType, IsolationLevel, Node,
                                 TopicCollection, TopicDescription, TopicPartitionInfo, _NamedEnum)
from broker.client.topic_admin import TopicAdmin
from broker.client.txn_admin import TransactionAdmin
from broker.errors import KafkaError, KafkaException, NetworkError, RiverlogError, error_for_code
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
    ``config``. The controller places replicas: a ``replica_assignment`` is refused at
    ``create_topics``."""

    def __init__(self, topic: str, num_partitions: int = -1, replication_factor: int = -1,
                 replica_assignment=None, config: dict | None = None):
        if isinstance(replica_assignment, dict) and config is None:
            replica_assignment, config = None, replica_assignment
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
    """Grow ``topic`` to ``new_total_count`` partitions (confluent-kafka's names); a
    ``replica_assignment`` is refused at ``create_partitions``, as for NewTopic."""

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


def _no_replica_assignment(items, what: str) -> None:
    placed = [i.topic for i in items if i.replica_assignment]
    if placed:
        raise ValueError(f"{what} {placed}: replica_assignment is not supported (the controller places "
                         f"replicas); give num_partitions and replication_factor instead")


@dataclass
class DescribeClusterResult:
    cluster_id: str
    controller: Node | None
    nodes: list[Node]
    metadata_offset: int = -1
    authorized_operations: list | None = None


class ResourceType(enum.IntEnum):
    """What a ConfigResource names; Riverlog has configs for TOPIC and BROKER (the others are refused
    per resource by the broker, as a Kafka broker refuses a type it has no configs for)."""
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    BROKER = 4
    TRANSACTIONAL_ID = 5


class ConfigSource(_NamedEnum):
    """Where a config value comes from (confluent-kafka's values); also equal to the broker's name
    for it, e.g. ``entry.source == "DYNAMIC_TOPIC_CONFIG"``."""
    UNKNOWN_CONFIG = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    GROUP_CONFIG = 8

    @classmethod
    def of(cls, name) -> "ConfigSource":
        if isinstance(name, cls):
            return name
        return cls.__members__.get(str(name), cls.UNKNOWN_CONFIG)


# confluent_kafka.admin's module constants (librdkafka's enum values, as plain ints).
CONFIG_SOURCE_UNKNOWN_CONFIG, CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG, CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG, \
    CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG, CONFIG_SOURCE_STATIC_BROKER_CONFIG, CONFIG_SOURCE_DEFAULT_CONFIG, \
    CONFIG_SOURCE_GROUP_CONFIG = (s.value for s in ConfigSource)
RESOURCE_UNKNOWN, RESOURCE_ANY, RESOURCE_TOPIC, RESOURCE_GROUP, RESOURCE_BROKER, RESOURCE_TRANSACTIONAL_ID = \
    (int(r) for r in ResourceType)


class AlterConfigOpType(enum.IntEnum):
    SET = 0
    DELETE = 1
    APPEND = 2     # add parts to a LIST config (cleanup.policy) that are not there yet
    SUBTRACT = 3   # remove parts from a LIST config


@dataclass
class ConfigEntry:
    name: str
    value: str | None
    source: ConfigSource = ConfigSource.UNKNOWN_CONFIG
    is_default: bool = False
    is_read_only: bool = False
    documentation: str = ""
    incremental_operation: AlterConfigOpType | None = None
    is_sensitive: bool = False
    is_synonym: bool = False
    synonyms: dict = field(default_factory=dict)

    def __post_init__(self):
        self.source = ConfigSource.of(self.source) if self.source != "" else ConfigSource.UNKNOWN_CONFIG


class ConfigResource:
    """A resource whose configs are described or altered (confluent-kafka's shape):
    ``set_config(name, value)`` fills ``set_config_dict`` for ``alter_configs``;
    ``add_incremental_config`` the entries of ``incremental_alter_configs``."""

    def __init__(self, restype, name: str, set_config: dict | None = None, described_configs=None, error=None,
                 incremental_configs: list | None = None):
        if isinstance(restype, str):
            try:
                restype = ResourceType[restype.upper()]
            except KeyError:
                raise ValueError(f'Unknown resource type "{restype}": should be a ResourceType value') from None
        elif isinstance(restype, int):
            restype = ResourceType(restype)
        self.restype, self.name = restype, name
        self.set_config_dict = dict(set_config or {})
        self.configs, self.error = described_configs, error
        self.incremental_configs = list(incremental_configs or [])

    def set_config(self, name: str, value, overwrite: bool = True) -> None:
        if overwrite or name not in self.set_config_dict:
            self.set_config_dict[name] = value

    def add_incremental_config(self, entry: ConfigEntry) -> None:
        self.incremental_configs.append(entry)

    def __hash__(self):
        return hash((int(self.restype), self.name))

    def __eq__(self, other):
        return isinstance(other, ConfigResource) and (self.restype, self.name) == (other.restype, other.name)

    def __lt__(self, other):
        return (int(self.restype), self.name) < (int(other.restype), other.name)

    def __repr__(self):
        return f"ConfigResource({self.restype.name},{self.name})"


class OffsetSpec:
    """What list_offsets asks for: earliest, latest, max timestamp, or a time in ms."""

    def __init__(self, value: int):
        self.value = value

    @classmethod
    def earliest(cls):
        return cls(-2)

    @classmethod
    def latest(cls):
        return cls(-1)

    @classmethod
    def max_timestamp(cls):
        return cls(-3)

    @classmethod
    def for_timestamp(cls, ms: int):
        return cls(ms)


@dataclass
class ListOffsetsResultInfo:
    offset: int
    timestamp: int
    leader_epoch: int | None = None


@dataclass
class DeletedRecords:
    """What delete_records resolves to: the partition's new low watermark (its log start offset)."""
    low_watermark: int


def _duplicate_in(resources) -> str | None:
    """librdkafka's message for a repeated ConfigResource, or a ConfigEntry repeated within one."""
    seen = set()
    for r in resources:
        if (int(r.restype), r.name) in seen:
            return "Duplicate ConfigResource found"
        seen.add((int(r.restype), r.name))
        names = [c.name for c in r.incremental_configs]
        if len(set(names)) != len(names):
            return "Duplicate ConfigEntry found"
    return None


def _error(code: int, message: str) -> RiverlogError:
    return error_for_code(code)(message)


class AdminClient(ConsumerGroupAdmin, TransactionAdmin, TopicAdmin):
    """Topics, partitions, configs, offsets, groups and transactions, as confluent-kafka's
    ``AdminClient``: every call returns futures at once and runs in the background, in the order
    the calls were made.

        with AdminClient({"bootstrap.servers": "127.0.0.1:9092"}) as admin:
            admin.create_topics([NewTopic("orders", 3)])["orders"].result()
            print(admin.list_topics().topics["orders"].partitions[0].leader)
    """

    def __init__(self, config: dict | None = None, **kwargs):
        cfg = client_config(ADMIN_CONFIG, config, kwargs)
        self.config = cfg
        self._events = ClientEvents(cfg, "admin")
        self.cluster = ClusterClient.from_config(cfg, self._events.error)
        # One worker: calls reach the brokers in the order they were made (delete_records then
        # list_offsets sees the new low watermark), as with confluent-kafka's AdminClient. A call
        # that waits (retrying while leadership moves) delays the ones made after it.
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="riverlog-admin")

    def _fan_out(self, keys, call, split):
        """Run ``call`` in the background, after every call made before it; ``split(response)``
        yields (key, error or value)."""
        futures = {k: Future() for k in keys}

        def run():
            try:
                response = call()
            except BaseException as e:  # noqa: BLE001 - every future must complete
                for f in futures.values():
                    f.set_exception(e)
                return
            for key, outcome in split(response):
                if key in futures and not futures[key].done():
                    if isinstance(outcome, Exception):
                        futures[key].set_exception(outcome)
                    else:
                        futures[key].set_result(outcome)
            for f in futures.values():
                if not f.done():
                    f.set_exception(RiverlogError("the broker's answer did not mention this item"))

        self._pool.submit(run)
        return futures

    def create_topics(self, new_topics: list[NewTopic], validate_only: bool = False,
                      operation_timeout: float = 30, request_timeout: float | None = None) -> dict[str, Future]:
        _no_replica_assignment(new_topics, "create_topics")
        request = pb.CreateTopicsRequest(validate_only=validate_only, topics=[
            pb.CreatableTopic(name=t.topic, num_partitions=t.num_partitions, replication_factor=t.replication_factor,
                              configs={k: str(v) for k, v in t.config.items()}) for t in new_topics])
        return self._fan_out([t.topic for t in new_topics],
                             lambda: self.cluster.call_any("CreateTopics", request, request_timeout),
                             lambda r: ((x.name, _error(x.error_code, x.error_message) if x.error_code else None)
                                        for x in r.results))

    def delete_topics(self, topics: list[str], operation_timeout: float = 30,
                      request_timeout: float | None = None) -> dict[str, Future]:
        request = pb.DeleteTopicsRequest(topics=topics)
        return self._fan_out(topics, lambda: self.cluster.call_any("DeleteTopics", request, request_timeout),
                             lambda r: ((x.name, _error(x.error_code, x.error_message) if x.error_code else None)
                                        for x in r.results))

    def create_partitions(self, new_partitions: list[NewPartitions], validate_only: bool = False,
                          operation_timeout: float = 30, request_timeout: float | None = None) -> dict[str, Future]:
        _no_replica_assignment(new_partitions, "create_partitions")
        request = pb.CreatePartitionsRequest(validate_only=validate_only, topics=[
            pb.CreatePartitionsTopic(name=p.topic, count=p.new_total_count) for p in new_partitions])
        return self._fan_out([p.topic for p in new_partitions],
                             lambda: self.cluster.call_any("CreatePartitions", request, request_timeout),
                             lambda r: ((x.name, _error(x.error_code, x.error_message) if x.error_code else None)
                                        for x in r.results))

    def elect_leaders(self, topic, partitions=None, request_timeout: float | None = None) -> Future:
        """Move leadership back to each partition's preferred (first) replica where it is in sync.
        confluent-kafka's form ``elect_leaders(ElectionType.PREFERRED, [TopicPartition, ...] | None)``
        gives a future of ``{TopicPartition: KafkaException | None}`` (None partitions: every
        partition of every topic); ``elect_leaders(topic, [partition, ...])`` is Riverlog's own."""
        if isinstance(topic, ElectionType):
            return self._elect_preferred(topic, partitions, request_timeout)
        request = pb.ElectLeadersRequest(topic=topic, partitions=partitions or [])
        return self._fan_out([topic], lambda: self.cluster.call_any("ElectLeaders", request, request_timeout),
                             lambda r: [(topic, _error(r.error_code, r.error_message) if r.error_code else None)])[topic]

    def _elect_preferred(self, election_type: ElectionType, partitions, request_timeout) -> Future:
        if election_type != ElectionType.PREFERRED:
            raise ValueError("only ElectionType.PREFERRED is supported: an unclean election is the controller's, "
                             "when unclean.leader.election.enable is set on the topic")
        result: Future = Future()

        def run():
            try:
                if partitions is None:
                    md = self.list_topics(timeout=request_timeout or 30)
                    wanted = [TopicPartition(t, p) for t, m in md.topics.items() if not t.startswith("__")
                              for p in m.partitions]
                else:
                    wanted = list(partitions)
                by_topic: dict[str, list[int]] = {}
                for tp in wanted:
                    by_topic.setdefault(tp.topic, []).append(tp.partition)
                out = {}
                for t, ps in sorted(by_topic.items()):
                    try:      # called here, not through elect_leaders: this runs on the pool already
                        r = self.cluster.call_any("ElectLeaders", pb.ElectLeadersRequest(topic=t, partitions=ps),
                                                  request_timeout)
                        error = _error(r.error_code, r.error_message) if r.error_code else None
                    except KafkaException as e:    # reported per partition, as confluent's result
                        error = e
                    out.update({TopicPartition(t, p): error for p in ps})
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
        active controller even when it is a controller-only node. ``include_authorized_operations``
        is accepted; ``authorized_operations`` stays None (no ACLs)."""
        def wanted(n) -> bool:
            return (n.broker and (include_fenced_brokers or not n.fenced)) or (include_controllers and n.voter)

        def split(r):
            every = [Node(n.node_id, n.host, n.port, fenced=n.fenced, voter=n.voter, broker=n.broker) for n in r.nodes]
            controller = next((n for n in every if n.id == r.controller_id), None)
            nodes = [n for n in every if wanted(n)]
            return [("cluster", DescribeClusterResult(r.cluster_id, controller, nodes, r.metadata_offset))]
        return self._fan_out(["cluster"], lambda: self.cluster.call_any("DescribeCluster", pb.DescribeClusterRequest(),
                                                                        request_timeout), split)["cluster"]

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        return self.cluster.snapshot([topic] if topic else None, None if timeout < 0 else timeout)

    def describe_configs(self, resources: list[ConfigResource], request_timeout: float | None = None):
        """Future per resource resolving to {name: ConfigEntry}."""
        request = pb.DescribeConfigsRequest(resources=[pb.ConfigResource(type=int(r.restype), name=r.name)
                                                       for r in resources])
        by_key = {(int(r.restype), r.name): r for r in resources}

        def split(response):
            for res in response.results:
                key = by_key.get((res.resource.type, res.resource.name))
                if res.error_code:
                    yield key, _error(res.error_code, res.error_message)
                else:
                    yield key, {e.name: ConfigEntry(e.name, e.value, e.source, e.is_default, e.read_only,
                                                    e.documentation) for e in res.entries}

        return self._fan_out(resources, lambda: self.cluster.call_any("DescribeConfigs", request, request_timeout),
                             split)

    def alter_configs(self, resources: list[ConfigResource], validate_only: bool = False,
                      request_timeout: float | None = None):
        """Replace each resource's overrides with its ``set_config_dict`` (unlisted keys return to defaults)."""
        return self._alter(resources, validate_only, False, request_timeout)

    def incremental_alter_configs(self, resources: list[ConfigResource], validate_only: bool = False,
                                  request_timeout: float | None = None):
        """Apply each resource's ``incremental_configs`` (SET, DELETE, or APPEND/SUBTRACT on a LIST
        config such as cleanup.policy) and keep other overrides. As librdkafka's
        ``rd_kafka_IncrementalAlterConfigs``, a resource listed twice or a config named twice in
        one resource fails every future with ``_INVALID_ARG`` and sends nothing."""
        duplicate = _duplicate_in(resources)
        if duplicate is not None:
            failed = {r: Future() for r in resources}
            for f in failed.values():
                f.set_exception(KafkaException(KafkaError(KafkaError._INVALID_ARG, duplicate)))
            return failed
        return self._alter(resources, validate_only, True, request_timeout)

    def _alter(self, resources, validate_only, incremental, request_timeout):
        request = pb.AlterConfigsRequest(validate_only=validate_only)
        by_key = {}
        for r in resources:
            by_key[(int(r.restype), r.name)] = r
            entry = request.resources.add(resource=pb.ConfigResource(type=int(r.restype), name=r.name),
                                          incremental=incremental)
            if incremental:
                for c in r.incremental_configs:
                    op = c.incremental_operation or AlterConfigOpType.SET
                    entry.configs.add(name=c.name, value="" if c.value is None else str(c.value), op=int(op))
            else:
                for k, v in r.set_config_dict.items():
                    entry.configs.add(name=k, value=str(v), op=0)

        def split(response):
            for res in response.results:
                key = by_key.get((res.resource.type, res.resource.name))
                yield key, _error(res.error_code, res.error_message) if res.error_code else None

        return self._fan_out(resources, lambda: self.cluster.call_any("AlterConfigs", request, request_timeout),
                             split)

    def list_offsets(self, topic_partition_offsets: dict[TopicPartition, OffsetSpec],
                     isolation_level: IsolationLevel = IsolationLevel.READ_UNCOMMITTED,
                     request_timeout: float | None = None) -> dict[TopicPartition, Future]:
        """Future per partition resolving to ListOffsetsResultInfo(offset, timestamp). Answers stop
        at the high watermark, or with ``IsolationLevel.READ_COMMITTED`` at the last stable offset:
        the latest offset is that bound, and a lookup by time finding nothing below it gives -1."""
        level = IsolationLevel(isolation_level).value

        def call():
            results = {}
            for tp, spec in topic_partition_offsets.items():
                request = pb.ListOffsetsRequest(isolation_level=level, topics=[pb.ListOffsetsTopic(
                    name=tp.topic, partitions=[pb.ListOffsetsPartition(partition=tp.partition,
                                                                       timestamp=spec.value)])])
                try:
                    node = self.cluster.leader(tp.topic, tp.partition)
                    r = self.cluster.call("ListOffsets", request, node, request_timeout).topics[0].partitions[0]
                    results[tp] = _error(r.error_code, r.error_message) if r.error_code \
                        else ListOffsetsResultInfo(r.offset, r.timestamp)
                except RiverlogError as e:
                    results[tp] = e
            return results

        return self._fan_out(list(topic_partition_offsets), call, lambda results: results.items())

    def delete_records(self, topic_partition_offsets, request_timeout: float | None = None,
                       operation_timeout: float | None = None) -> dict[TopicPartition, Future]:
        """Delete every record below an offset, per partition; a future per partition resolving to
        :class:`DeletedRecords`. Takes confluent-kafka's list of TopicPartition (offset set) or a
        ``{TopicPartition: offset}`` dict; offset -1 deletes up to the high watermark. An offset past
        the high watermark fails with OffsetOutOfRangeError.

            fs = admin.delete_records([TopicPartition("orders", 0, 1000)])
            fs[tp].result().low_watermark     # 1000
        """
        if isinstance(topic_partition_offsets, dict):
            wanted = {tp: offset for tp, offset in topic_partition_offsets.items()}
        else:
            wanted = {tp: tp.offset for tp in topic_partition_offsets}

        def call():
            results = {}
            for tp, offset in wanted.items():
                request = pb.DeleteRecordsRequest(timeout_ms=int((request_timeout or 30) * 1000), topics=[
                    pb.DeleteRecordsTopic(name=tp.topic, partitions=[
                        pb.DeleteRecordsPartition(partition=tp.partition, offset=offset)])])
                results[tp] = self._delete_records_at_leader(tp, request, request_timeout)
            return results

        return self._fan_out(list(wanted), call, lambda results: results.items())

    def _delete_records_at_leader(self, tp: TopicPartition, request, timeout: float | None):
        return self._at_leader(tp, "DeleteRecords", request, timeout,
                               lambda response: response.topics[0].partitions[0],
                               lambda r: DeletedRecords(r.low_watermark))

    def _at_leader(self, tp: TopicPartition, method: str, request, timeout: float | None, pick, make):
        """``method`` at the partition's leader; ``pick(response)`` is the partition's result (with an
        error code), ``make(result)`` the value. While leadership moves (retriable errors), refresh
        and retry; returns the error, not raises it (a future per partition carries it)."""
        deadline = time.monotonic() + (timeout or self.cluster.timeout)
        while True:
            try:
                node = self.cluster.leader(tp.topic, tp.partition)
                r = pick(self.cluster.call(method, request, node, timeout))
                if not r.error_code:
                    return make(r)
                error = _error(r.error_code, r.error_message)
            except RiverlogError as e:
                error = e
            if not (error.retriable or isinstance(error, NetworkError)) or time.monotonic() >= deadline:
                return error
            time.sleep(0.1)
            try:
                self.cluster.refresh([tp.topic])
            except RiverlogError:
                pass

    def poll(self, timeout: float | None = None) -> int:
        """Serve ``error_cb``/``stats_cb`` (results come as futures, so there is nothing else to serve)."""
        return self._events.serve()

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self.cluster.close()
        self._events.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
