"""The gRPC shell around the broker: listeners, the request loop, lifecycle.

:class:`BrokerServer` owns one node's listeners (see ``listeners.py``: client, inter-broker and
controller, each its own socket), all served from one asyncio loop (``rpc.py``) so that a waiting
request holds no thread, plus the flush, retention, expiration and high-watermark checkpoint
threads, and clean shutdown. What each listener answers is ``servicers.py``.

    with EmbeddedBroker() as broker:            # a throwaway single-node broker in this process
        Producer({"bootstrap.servers": broker.bootstrap_servers})
"""
from __future__ import annotations

import asyncio
import logging
import tempfile
import threading
from concurrent import futures

from broker.clock import SYSTEM_CLOCK, Clock
from broker.config import BROKER_CONFIG, Config
from broker.proto import riverlog_pb2_grpc as pb_grpc
from broker.server.broker import Broker
from broker.server.controller_runtime import parse_voters
from broker.server.group_handlers import GroupHandlers
from broker.server.group_runtime import GroupRuntime
from broker.server.handlers import Handlers
from broker.server.internal import BROKER_METHODS, CONTROLLER_METHODS, InternalHandlers
from broker.server.listeners import plan_listeners
from broker.server.log_cleaner import LogCleaner
from broker.server.rpc import RpcLoop
from broker.server.servicers import ClientServicer, InterBrokerServicer, InternalServicer
from broker.server.txn_handlers import TransactionHandlers
from broker.server.txn_runtime import TransactionRuntime

log = logging.getLogger(__name__)

INTERNAL_THREADS = 16  # per internal pool: peers are few, and Raft must never queue behind clients


class BrokerServer:
    """One node's listeners and background threads around its :class:`Broker`.

    The client listener (``listeners``) serves the public service only; the inter-broker listener
    (``inter.broker.listener.name``, a free port unless named) serves other brokers; a controller in
    a quorum of named voters also listens on its ``controller.quorum.voters`` address.
    """

    def __init__(self, config: Config, clock: Clock = SYSTEM_CLOCK):
        self.config = config
        self._stopped = threading.Event()
        node_id = config["node.id"]
        roles = {r.strip() for r in config["process.roles"].split(",")}
        voter = parse_voters(config["controller.quorum.voters"]).get(node_id) if "controller" in roles else None
        plan = plan_listeners(config, voter)
        self.rpc = RpcLoop(config["num.io.threads"])
        max_send = config["fetch.max.bytes"] + (16 << 20)
        self._servers = []

        def listen(address) -> tuple:
            server = self.rpc.server(config["socket.request.max.bytes"], max_send)
            self._servers.append(server)
            return server, server.add_insecure_port(f"{address[0]}:{address[1]}")

        client, self.port = listen(plan.client)
        self.host, adv_port = plan.advertised_client or (plan.client[0], self.port)
        inter, self.inter_broker_port = listen(plan.inter_broker) if "broker" in roles else (None, None)
        adv_inter = plan.advertised_inter_broker or (plan.inter_broker[0], self.inter_broker_port)
        self.broker = Broker(config, clock, self.host, adv_port or self.port,
                             inter_broker=adv_inter if inter is not None else None)
        self.handlers = Handlers(self.broker, self.host, adv_port or self.port)
        self.groups = GroupRuntime(self.broker) if self.broker.is_broker else None
        self.transactions = TransactionRuntime(self.broker, self.groups) if self.broker.is_broker else None
        group_handlers = GroupHandlers(self.groups) if self.groups is not None else None
        txn_handlers = TransactionHandlers(self.transactions) if self.transactions is not None else None
        pb_grpc.add_RiverlogServicer_to_server(
            ClientServicer(self.rpc, self.rpc.pool, self.handlers, group_handlers, txn_handlers), client)
        self._internal_pool = futures.ThreadPoolExecutor(INTERNAL_THREADS, thread_name_prefix="riverlog-internal")
        if inter is not None:
            pb_grpc.add_RiverlogServicer_to_server(InterBrokerServicer(
                self.rpc, self._internal_pool, self.handlers, group_handlers, txn_handlers), inter)
            pb_grpc.add_RiverlogInternalServicer_to_server(InternalServicer(
                self.rpc, self._internal_pool, InternalHandlers(self.broker, BROKER_METHODS)), inter)
        if plan.controller is not None:
            controller, _ = listen(plan.controller)
            pb_grpc.add_RiverlogInternalServicer_to_server(InternalServicer(
                self.rpc, self._internal_pool, InternalHandlers(self.broker, CONTROLLER_METHODS)), controller)
        self._scheduler = threading.Thread(target=self._every, args=(
            "log.flush.scheduler.interval.ms", self.broker.flush_due, "scheduled flush"),
            name="riverlog-scheduler", daemon=True)
        self._retention = threading.Thread(target=self._every, args=(
            "log.retention.check.interval.ms", self.broker.apply_retention, "retention check"),
            name="riverlog-retention", daemon=True)
        self._expiration = threading.Thread(target=self._every, args=(
            "producer.id.expiration.check.interval.ms", self.broker.expire_producers, "producer expiration"),
            name="riverlog-producer-expiration", daemon=True)
        self._hw_checkpoint = threading.Thread(target=self._every, args=(
            "replica.high.watermark.checkpoint.interval.ms", self.broker.checkpoint_high_watermarks,
            "high-watermark checkpoint"), name="riverlog-highwatermark-checkpoint", daemon=True)
        self.cleaner = LogCleaner(config, clock, self.broker.replicas.hosted)

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, wait_ready: float = 0) -> "BrokerServer":
        """Serve; with ``wait_ready``, also wait (up to that many seconds) until the broker is
        registered and unfenced, so clients can use it at once."""
        for server in self._servers:
            self.rpc.call(server.start())
        self.broker.start()
        if self.groups is not None:
            self.groups.start()
            self.transactions.start()
        self._scheduler.start()
        self._retention.start()
        self._expiration.start()
        if self.broker.is_broker:
            self._hw_checkpoint.start()
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
        async def stop_all():
            await asyncio.gather(*(server.stop(grace) for server in self._servers))
        self.rpc.call(stop_all())
        self.rpc.close()
        self._internal_pool.shutdown(wait=False, cancel_futures=True)
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
    Import it from ``broker.embedded``.

        with EmbeddedBroker(config={"log.retention.ms": 3_600_000}) as broker:
            Producer({"bootstrap.servers": broker.bootstrap_servers}).produce("clicks", b"hello")
    """

    def __init__(self, data_dir: str | None = None, port: int = 0, config: dict | None = None):
        self._tmp = None
        if data_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="riverlog-")
            data_dir = self._tmp.name
        values = {"log.dirs": data_dir, "listeners": f"127.0.0.1:{port}"}
        values.update(config or {})
        super().__init__(BROKER_CONFIG.parse(values))
        self.start(wait_ready=30)

    def stop(self, grace: float = 1.0) -> None:
        super().stop(grace)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
