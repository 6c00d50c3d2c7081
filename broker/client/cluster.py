"""What a client knows of the cluster: brokers, channels to them, and topic metadata.

One :class:`ClusterClient` is shared by a client's threads. It bootstraps from any listed server,
keeps one gRPC channel per broker, caches topic metadata (refreshed on demand and when a retriable
error says it is stale), and turns gRPC failures into the typed errors of ``broker.errors``: the
``riverlog-error-code`` trailer when the broker sent one, otherwise a network error.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import grpc

from broker.client.metadata_refresh import start_refresher, stop_refresher
from broker.errors import (ERROR_CODE_KEY, BrokerNotAvailableError, InvalidRequestError, KafkaError, KafkaTimeoutError,
                           LeaderNotAvailableError, NetworkError,
                           RecordListTooLargeError, RiverlogError, UnknownServerError,
                           UnknownTopicOrPartitionError, UnsupportedVersionError, error_for_code)
from broker.proto import riverlog_pb2 as pb
from broker.proto import riverlog_pb2_grpc as pb_grpc

_CHANNEL_OPTIONS = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1),
                    ("grpc.enable_retries", 0)]


def channel_options(reconnect_backoff_ms: int, reconnect_backoff_max_ms: int) -> list:
    """gRPC's reconnect backoff grows to minutes by default; Kafka clients cap it at a second."""
    return _CHANNEL_OPTIONS + [("grpc.initial_reconnect_backoff_ms", reconnect_backoff_ms),
                               ("grpc.min_reconnect_backoff_ms", reconnect_backoff_ms),
                               ("grpc.max_reconnect_backoff_ms", reconnect_backoff_max_ms)]


def translate_rpc_error(error: grpc.RpcError, what: str) -> RiverlogError:
    """The typed error a failed RPC stands for; ``error`` is spent.

    A failed streaming call or future raises itself, and its traceback holds it in a reference
    cycle that only the collector frees, perhaps at interpreter shutdown, where its ``__del__``
    waits on a lock a frozen gRPC thread may hold: the exit hangs. The traceback is dropped here.
    """
    error.__traceback__ = None
    code = None
    for key, value in (error.trailing_metadata() or ()):
        if key == ERROR_CODE_KEY:
            code = int(value)
    details = error.details() or ""
    if code is not None:
        return error_for_code(code)(details)
    status = error.code()
    if status == grpc.StatusCode.DEADLINE_EXCEEDED:
        return KafkaTimeoutError(f"{what} timed out")
    if status == grpc.StatusCode.RESOURCE_EXHAUSTED:
        return RecordListTooLargeError(f"{what} was refused by the transport: {details}")
    kind = _TRANSPORT_ERRORS.get(status, NetworkError)
    return kind(f"{what} failed: {status.name} {details}".strip())


_TRANSPORT_ERRORS = {
    grpc.StatusCode.INTERNAL: UnknownServerError,
    grpc.StatusCode.UNKNOWN: UnknownServerError,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidRequestError,
    grpc.StatusCode.UNIMPLEMENTED: UnsupportedVersionError,
}


def raise_for(code: int, message: str) -> None:
    if code:
        raise error_for_code(code)(message)


@dataclass
class PartitionInfo:
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    error: RiverlogError | None = None

    @property
    def id(self) -> int:
        """confluent-kafka's PartitionMetadata.id."""
        return self.partition

    @property
    def isrs(self) -> list[int]:
        """confluent-kafka's PartitionMetadata.isrs."""
        return self.isr


@dataclass
class TopicInfo:
    name: str
    topic_id: str
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    error: RiverlogError | None = None

    @property
    def topic(self) -> str:
        """confluent-kafka's TopicMetadata.topic."""
        return self.name


class BrokerMetadata(str):
    """A broker's "host:port" with confluent-kafka's BrokerMetadata attributes: ``id``, ``host``, ``port``."""

    def __new__(cls, node_id: int, address: str):
        self = super().__new__(cls, address)
        self.id = node_id
        host, _, port = address.rpartition(":")
        self.host, self.port = host, int(port) if port.isdigit() else -1
        return self


@dataclass
class ClusterMetadata:
    """The shape confluent-kafka's ``list_topics()`` returns."""
    cluster_id: str
    controller_id: int
    brokers: dict[int, str]
    topics: dict[str, TopicInfo]


class ClusterClient:
    def __init__(self, bootstrap_servers: str, request_timeout_ms: int = 30_000,
                 retry_backoff_ms: int = 100, reconnect_backoff_ms: int = 50,
                 reconnect_backoff_max_ms: int = 1000):
        servers = [s.strip() for s in bootstrap_servers.split(",") if s.strip()]
        if not servers:
            from broker.errors import InvalidConfigError
            raise InvalidConfigError("bootstrap.servers is required (e.g. '127.0.0.1:9092')",
                                     config="bootstrap.servers")
        self.bootstrap = servers
        self.timeout = request_timeout_ms / 1000.0
        self.backoff = retry_backoff_ms / 1000.0
        self._options = channel_options(reconnect_backoff_ms, reconnect_backoff_max_ms)
        self._lock = threading.RLock()
        self._channels: dict[str, grpc.Channel] = {}
        self._stubs: dict[str, pb_grpc.RiverlogStub] = {}
        self.brokers: dict[int, str] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.cluster_id = ""
        self.controller_id = -1
        # Whether this client's metadata requests for named topics may create them on a broker with
        # auto.create.topics.enable: producers and consumers yes (see from_config), admin clients no.
        self.allow_auto_create = False
        self._closed = False
        # Addresses whose last call_any failed, and when: tried after the others (Kafka's
        # leastLoadedNode passes over a node in reconnect backoff), so a broker that accepts
        # connections and never answers is not asked first every time.
        self._failed_at: dict[str, float] = {}
        # ``callback(KafkaError)`` when a call finds no broker answering (librdkafka's
        # _ALL_BROKERS_DOWN for ``error_cb``): once per outage, again after a broker has answered.
        self.on_all_brokers_down = None
        self._all_down = False

    # ----------------------------------------------------------------------------- transport
    def stub_for_address(self, address: str) -> pb_grpc.RiverlogStub:
        with self._lock:
            if self._closed:
                from broker.errors import ClientClosedError
                raise ClientClosedError("the client is closed")
            stub = self._stubs.get(address)
            if stub is None:
                channel = grpc.insecure_channel(address, options=self._options)
                self._channels[address] = channel
                stub = self._stubs[address] = pb_grpc.RiverlogStub(channel)
            return stub

    def stub(self, node_id: int | None = None) -> pb_grpc.RiverlogStub:
        if node_id is None:
            return self.stub_for_address(self._any_address())
        address = self.brokers.get(node_id)
        if address is None:
            self.refresh()
            address = self.brokers.get(node_id)
            if address is None:
                raise BrokerNotAvailableError(f"broker {node_id} is not in the cluster metadata")
        return self.stub_for_address(address)

    @classmethod
    def from_config(cls, cfg, on_all_brokers_down=None) -> "ClusterClient":
        client = cls(cfg["bootstrap.servers"], cfg["request.timeout.ms"], cfg["retry.backoff.ms"],
                     cfg["reconnect.backoff.ms"], cfg["reconnect.backoff.max.ms"])
        client.on_all_brokers_down = on_all_brokers_down
        # Producers ask for auto-creation always (as Kafka's); consumers per allow.auto.create.topics.
        client.allow_auto_create = cfg.get("allow.auto.create.topics", getattr(
            getattr(cfg, "_definition", None), "what", "") == "producer")
        client.refresher = start_refresher(client, cfg)  # metadata.max.age.ms
        return client

    def _any_address(self) -> str:
        return next(iter(self.brokers.values()), self.bootstrap[0])

    def call(self, method: str, request, node_id: int | None = None, timeout: float | None = None):
        """Call ``method`` on a broker (any broker when ``node_id`` is None); typed errors only."""
        try:
            return getattr(self.stub(node_id), method)(request, timeout=timeout or self.timeout)
        except grpc.RpcError as e:
            raise translate_rpc_error(e, method) from None

    def call_any(self, method: str, request, timeout: float | None = None):
        """Call ``method`` on the first bootstrap or known broker that answers, those that failed
        last time after the others."""
        deadline = time.monotonic() + (timeout or self.timeout)
        last: RiverlogError | None = None
        while True:
            addresses = sorted(dict.fromkeys(list(self.brokers.values()) + self.bootstrap),
                               key=lambda a: self._failed_at.get(a, 0.0))
            for i, address in enumerate(addresses):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                # A stopped (not dead) broker accepts connections and never answers: give each
                # candidate a share of the time so one such broker cannot use all of it.
                share = remaining if i == len(addresses) - 1 else max(remaining / (len(addresses) - i), 1.0)
                try:
                    reply = getattr(self.stub_for_address(address), method)(request, timeout=min(share, remaining))
                except grpc.RpcError as e:
                    last = translate_rpc_error(e, method)
                    if not last.retriable and not isinstance(last, NetworkError):
                        raise last from None   # an answer: the broker is fine
                    self._failed_at[address] = time.monotonic()
                else:
                    self._failed_at.pop(address, None)
                    self._all_down = False
                    return reply
            if time.monotonic() + self.backoff >= deadline:
                self._report_all_down(len(addresses))
                raise last or KafkaTimeoutError(f"{method}: no broker answered") from None
            time.sleep(self.backoff)

    def _report_all_down(self, brokers: int) -> None:
        if self._all_down or self.on_all_brokers_down is None or self._closed:
            return
        self._all_down = True
        self.on_all_brokers_down(KafkaError(KafkaError._ALL_BROKERS_DOWN, f"{brokers}/{brokers} brokers are down",
                                            retriable=True))

    # ----------------------------------------------------------------------------- metadata
    def refresh(self, topics: list[str] | None = None, all_topics: bool = False,
                timeout: float | None = None) -> pb.MetadataResponse:
        request = pb.MetadataRequest(topics=topics or [], all_topics=all_topics or topics is None,
                                     allow_auto_topic_creation=self.allow_auto_create and bool(topics))
        response = self.call_any("Metadata", request, timeout)
        with self._lock:
            self.cluster_id, self.controller_id = response.cluster_id, response.controller_id
            self.brokers = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
            for tm in response.topics:
                if tm.error_code:
                    self.topics.pop(tm.name, None)
                    continue
                info = TopicInfo(tm.name, tm.topic_id)
                for p in tm.partitions:
                    info.partitions[p.partition] = PartitionInfo(
                        p.partition, p.leader, p.leader_epoch, list(p.replicas), list(p.isr),
                        error_for_code(p.error_code)(p.error_message) if p.error_code else None)
                self.topics[tm.name] = info
        return response

    def topic(self, name: str, refresh_if_missing: bool = True, timeout: float | None = None) -> TopicInfo:
        info = self.topics.get(name)
        if info is None and refresh_if_missing:
            self.refresh([name], timeout=timeout)
            info = self.topics.get(name)
        if info is None:
            raise UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
        return info

    def leader(self, topic: str, partition: int) -> int:
        return self.leader_and_epoch(topic, partition)[0]

    def leader_and_epoch(self, topic: str, partition: int) -> tuple[int, int]:
        """(leader, leader epoch) of one metadata answer: a consumer fences its fetches with the epoch."""
        info = self.topic(topic)
        p = info.partitions.get(partition)
        if p is None:
            raise UnknownTopicOrPartitionError(
                f"topic '{topic}' has {len(info.partitions)} partition(s); partition {partition} does not exist")
        if p.leader < 0:
            raise LeaderNotAvailableError(f"{topic}-{partition} has no leader right now")
        return p.leader, p.leader_epoch

    def snapshot(self, topics: list[str] | None = None, timeout: float | None = None) -> ClusterMetadata:
        response = self.refresh(topics, all_topics=topics is None, timeout=timeout)
        topics_out = {}
        for tm in response.topics:
            info = self.topics.get(tm.name) or TopicInfo(tm.name, tm.topic_id)
            if tm.error_code:
                info = TopicInfo(tm.name, "", error=error_for_code(tm.error_code)(tm.error_message))
            topics_out[tm.name] = info
        return ClusterMetadata(self.cluster_id, self.controller_id,
                               {i: BrokerMetadata(i, a) for i, a in self.brokers.items()}, topics_out)

    def close(self) -> None:
        stop_refresher(self)
        with self._lock:
            self._closed = True
            for channel in self._channels.values():
                channel.close()
            self._channels.clear()
            self._stubs.clear()
