"""The gRPC shell around the broker: threads, sockets, error mapping and lifecycle.

:class:`BrokerServer` owns the gRPC server (a thread pool of ``num.io.threads``; a long-polling
fetch holds one thread while it waits), the flush scheduler thread, and clean shutdown.
:class:`ErrorInterceptor` is the one place where a typed error becomes a gRPC status: the status
code is the error's, and trailing metadata ``riverlog-error-code`` carries its stable code so the
client rebuilds the same class.

    with EmbeddedBroker() as broker:            # a throwaway single-node broker in this process
        Producer({"bootstrap.servers": broker.bootstrap_servers})
"""
from __future__ import annotations

import json
import logging
import tempfile
import threading
from concurrent import futures

import grpc

from broker.clock import SYSTEM_CLOCK, Clock
from broker.config import BROKER_CONFIG, Config
from broker.errors import NotCoordinatorError, RiverlogError, UnknownServerError
from broker.proto import riverlog_pb2 as pb
from broker.proto import riverlog_pb2_grpc as pb_grpc
from broker.server.broker import Broker
from broker.server.group_handlers import GroupHandlers
from broker.server.group_runtime import GroupRuntime
from broker.server.handlers import Handlers
from broker.server.txn_handlers import TransactionHandlers
from broker.server.txn_runtime import TransactionRuntime
from broker.server.internal import InternalHandlers
from broker.server.log_cleaner import LogCleaner

log = logging.getLogger(__name__)

ERROR_CODE_KEY = "riverlog-error-code"


class ErrorInterceptor(grpc.ServerInterceptor):
    """Turn exceptions escaping a handler into a gRPC status with the error's stable code."""

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        inner = handler.unary_unary

        def guarded(request, context):
            try:
                return inner(request, context)
            except RiverlogError as e:
                _abort(context, e)
            except Exception as e:  # noqa: BLE001 - the client must get a typed answer
                log.exception("unhandled error in %s", handler_call_details.method)
                _abort(context, UnknownServerError(f"{type(e).__name__}: {e}"))

        return grpc.unary_unary_rpc_method_handler(
            guarded, request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer)


def _abort(context, error: RiverlogError):
    context.set_trailing_metadata(((ERROR_CODE_KEY, str(error.code)),))
    context.abort(grpc.StatusCode[error.grpc_status], error.message)


class _Servicer(pb_grpc.RiverlogServicer):
    def __init__(self, handlers: Handlers, groups: GroupHandlers | None, transactions: TransactionHandlers | None):
        self.h = handlers
        self.g = groups
        self.t = transactions

    def Metadata(self, request, context):
        return self.h.metadata(request)

    def CreateTopics(self, request, context):
        return self.h.create_topics(request)

    def DeleteTopics(self, request, context):
        return self.h.delete_topics(request)

    def CreatePartitions(self, request, context):
        return self.h.create_partitions(request)

    def ElectLeaders(self, request, context):
        return self.h.elect_leaders(request)

    def DescribeCluster(self, request, context):
        return self.h.describe_cluster(request)

    def DeleteRecords(self, request, context):
        return self.h.delete_records(request)

    def Produce(self, request, context):
        return self.h.produce(request)

    def ProduceStream(self, request_iterator, context):
        for request in request_iterator:
            response = self.h.produce(request)
            response.correlation_id = request.correlation_id
            yield response

    def Fetch(self, request, context):
        return self.h.fetch(request, context.is_active)

    def ListOffsets(self, request, context):
        return self.h.list_offsets(request)

    def DescribeConfigs(self, request, context):
        return self.h.describe_configs(request)

    def AlterConfigs(self, request, context):
        return self.h.alter_configs(request)

    # consumer groups
    def _groups(self) -> GroupHandlers:
        if self.g is None:
            raise NotCoordinatorError("this node has no broker role: it coordinates no groups")
        return self.g

    def InitProducerId(self, request, context):
        if request.transactional_id:
            return self._txns().init_producer_id(request)
        return self.h.init_producer_id(request)

    def FindCoordinator(self, request, context):
        runtime = (self._txns() if request.key_type == 1 else self._groups()).runtime
        node, host, port = runtime.find_coordinator(request.group_id)
        return pb.FindCoordinatorResponse(node_id=node, host=host, port=port)

    # transactions
    def _txns(self) -> TransactionHandlers:
        if self.t is None:
            raise NotCoordinatorError("this node has no broker role: it coordinates no transactions")
        return self.t

    def AddPartitionsToTxn(self, request, context):
        return self._txns().add_partitions(request)

    def AddOffsetsToTxn(self, request, context):
        return self._txns().add_offsets(request)

    def TxnOffsetCommit(self, request, context):
        return self._txns().txn_offset_commit(request)

    def EndTxn(self, request, context):
        return self._txns().end(request)

    def WriteTxnMarkers(self, request, context):
        return self._txns().write_markers(request)

    def ListTransactions(self, request, context):
        return self._txns().list_transactions(request)

    def DescribeTransactions(self, request, context):
        return self._txns().describe_transactions(request)

    def AbortTransaction(self, request, context):
        return self._txns().abort(request)

    def DescribeProducers(self, request, context):
        return self._txns().describe_producers(request)

    def ConsumerGroupHeartbeat(self, request, context):
        return self._groups().heartbeat(request)

    def OffsetCommit(self, request, context):
        return self._groups().offset_commit(request)

    def OffsetFetch(self, request, context):
        return self._groups().offset_fetch(request)

    def ListGroups(self, request, context):
        return self._groups().list_groups(request)

    def DescribeGroups(self, request, context):
        return self._groups().describe_groups(request)

    def DeleteGroups(self, request, context):
        return self._groups().delete_groups(request)

    def OffsetDelete(self, request, context):
        return self._groups().offset_delete(request)


class _InternalServicer(pb_grpc.RiverlogInternalServicer):
    def __init__(self, internal: InternalHandlers):
        self.internal = internal

    def Call(self, request, context):
        body = json.loads(request.body) if request.body else {}
        return pb.InternalResponse(body=json.dumps(self.internal.call(request.method, body)).encode())


def _split_listener(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    return (host or "127.0.0.1").strip("[]"), int(port)


def _grpc_server(config: Config, workers: int) -> grpc.Server:
    return grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="riverlog-io"),
        interceptors=[ErrorInterceptor()],
        options=[("grpc.max_receive_message_length", config["socket.request.max.bytes"]),
                 ("grpc.max_send_message_length", config["fetch.max.bytes"] + (16 << 20)),
                 ("grpc.so_reuseport", 0)])


class BrokerServer:
    """One node's servers: the broker listener (clients and replication) and, for a controller in a
    multi-node quorum, the controller listener named in ``controller.quorum.voters``."""

    def __init__(self, config: Config, clock: Clock = SYSTEM_CLOCK):
        self.config = config
        self._stopped = threading.Event()
        self._grpc = _grpc_server(config, config["num.io.threads"])
        host, port = _split_listener(config["listeners"])
        self.port = self._grpc.add_insecure_port(f"{host}:{port}")
        advertised = config["advertised.listeners"]
        self.host, adv_port = _split_listener(advertised) if advertised else (host, self.port)
        self.broker = Broker(config, clock, self.host, adv_port or self.port)
        self.handlers = Handlers(self.broker, self.host, adv_port or self.port)
        internal = _InternalServicer(InternalHandlers(self.broker))
        self.groups = GroupRuntime(self.broker) if self.broker.is_broker else None
        self.transactions = TransactionRuntime(self.broker, self.groups) if self.broker.is_broker else None
        group_handlers = GroupHandlers(self.groups) if self.groups is not None else None
        txn_handlers = TransactionHandlers(self.transactions) if self.transactions is not None else None
        pb_grpc.add_RiverlogServicer_to_server(_Servicer(self.handlers, group_handlers, txn_handlers), self._grpc)
        pb_grpc.add_RiverlogInternalServicer_to_server(internal, self._grpc)
        self._controller_grpc = None
        voter = self.broker.voters.get(self.broker.node_id) if self.broker.is_controller else None
        if voter is not None and config["controller.quorum.voters"] and voter[1] != self.port:
            self._controller_grpc = _grpc_server(config, 16)
            self._controller_grpc.add_insecure_port(f"{host}:{voter[1]}")
            pb_grpc.add_RiverlogInternalServicer_to_server(internal, self._controller_grpc)
        self._scheduler = threading.Thread(target=self._every, args=(
            "log.flush.scheduler.interval.ms", self.broker.flush_due, "scheduled flush"),
            name="riverlog-scheduler", daemon=True)
        self._retention = threading.Thread(target=self._every, args=(
            "log.retention.check.interval.ms", self.broker.apply_retention, "retention check"),
            name="riverlog-retention", daemon=True)
        self._expiration = threading.Thread(target=self._every, args=(
            "producer.id.expiration.check.interval.ms", self.broker.expire_producers, "producer expiration"),
            name="riverlog-producer-expiration", daemon=True)
        self.cleaner = LogCleaner(config, clock, self.broker.replicas.hosted)

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, wait_ready: float = 0) -> "BrokerServer":
        """Serve; with ``wait_ready``, also wait (up to that many seconds) until the broker is
        registered and unfenced, so clients can use it at once."""
        self._grpc.start()
        if self._controller_grpc is not None:
            self._controller_grpc.start()
        self.broker.start()
        if self.groups is not None:
            self.groups.start()
            self.transactions.start()
        self._scheduler.start()
        self._retention.start()
        self._expiration.start()
        self.cleaner.start()
        if wait_ready and not self.broker.wait_until_ready(wait_ready):
            log.warning("node %d is serving but not yet registered with an active controller",
                        self.broker.node_id)
        log.info("node %d (%s) listening on %s", self.broker.node_id, self.config["process.roles"],
                 self.bootstrap_servers)
        return self

    def _every(self, interval_key: str, action, what: str) -> None:
        interval = self.config[interval_key] / 1000.0
        while not self._stopped.wait(interval):
            try:
                action()
            except Exception:  # noqa: BLE001 - keep the thread alive; the error is logged
                log.exception("%s failed", what)

    def wait(self) -> None:
        self._stopped.wait()

    def stop(self, grace: float = 2.0) -> None:
        """Move leadership away (controlled shutdown), stop serving, then flush and close every
        log so the next start needs no recovery."""
        if self._stopped.is_set():
            return
        self.broker.controlled_shutdown()
        self._stopped.set()
        if self.groups is not None:
            self.transactions.stop()
            self.groups.stop()
        self._grpc.stop(grace).wait()
        if self._controller_grpc is not None:
            self._controller_grpc.stop(grace).wait()
        self.cleaner.stop()
        self.broker.close()
        log.info("node %d stopped cleanly", self.broker.node_id)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class EmbeddedBroker(BrokerServer):
    """A single-node broker inside this Python process, for notebooks, demos and experiments.

    Uses a temporary data directory (removed on stop) unless ``data_dir`` is given, and a free
    port unless ``port`` is given; ``config`` takes any other broker settings by Kafka name.
    """

    def __init__(self, data_dir: str | None = None, port: int = 0, config: dict | None = None):
        self._tmp = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="riverlog-")
            data_dir = self._tmp.name
        values = {"log.dirs": data_dir, "listeners": f"127.0.0.1:{port}", "num.io.threads": 16}
        values.update(config or {})
        super().__init__(BROKER_CONFIG.parse(values))
        self.start(wait_ready=30)

    def stop(self, grace: float = 1.0) -> None:
        super().stop(grace)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
