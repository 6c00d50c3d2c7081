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

import logging
import tempfile
import threading
from concurrent import futures

import grpc

from broker.clock import SYSTEM_CLOCK, Clock
from broker.config import BROKER_CONFIG, Config
from broker.errors import RiverlogError, UnknownServerError
from broker.proto import riverlog_pb2_grpc as pb_grpc
from broker.server.broker import Broker
from broker.server.handlers import Handlers

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
    def __init__(self, handlers: Handlers):
        self.h = handlers

    def Metadata(self, request, context):
        return self.h.metadata(request)

    def CreateTopics(self, request, context):
        return self.h.create_topics(request)

    def DeleteTopics(self, request, context):
        return self.h.delete_topics(request)

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


def _split_listener(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    return (host or "127.0.0.1").strip("[]"), int(port)


class BrokerServer:
    """One broker process's server: start, serve, stop (cleanly or not)."""

    def __init__(self, config: Config, clock: Clock = SYSTEM_CLOCK):
        self.config = config
        self.broker = Broker(config, clock)
        self._stopped = threading.Event()
        self._grpc = grpc.server(
            futures.ThreadPoolExecutor(max_workers=config["num.io.threads"], thread_name_prefix="riverlog-io"),
            interceptors=[ErrorInterceptor()],
            options=[("grpc.max_receive_message_length", config["socket.request.max.bytes"]),
                     ("grpc.max_send_message_length", config["fetch.max.bytes"] + (16 << 20)),
                     ("grpc.so_reuseport", 0)])
        host, port = _split_listener(config["listeners"])
        self.port = self._grpc.add_insecure_port(f"{host}:{port}")
        advertised = config["advertised.listeners"]
        self.host, adv_port = _split_listener(advertised) if advertised else (host, self.port)
        self.handlers = Handlers(self.broker, self.host, adv_port or self.port)
        pb_grpc.add_RiverlogServicer_to_server(_Servicer(self.handlers), self._grpc)
        self._scheduler = threading.Thread(target=self._run_scheduler, name="riverlog-scheduler", daemon=True)

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> "BrokerServer":
        self._grpc.start()
        self._scheduler.start()
        log.info("broker %d listening on %s", self.broker.node_id, self.bootstrap_servers)
        return self

    def _run_scheduler(self) -> None:
        interval = self.config["log.flush.scheduler.interval.ms"] / 1000.0
        while not self._stopped.wait(interval):
            try:
                self.broker.flush_due()
            except Exception:  # noqa: BLE001 - keep the scheduler alive; the error is logged
                log.exception("scheduled flush failed")

    def wait(self) -> None:
        self._stopped.wait()

    def stop(self, grace: float = 2.0) -> None:
        """Stop serving, then flush and close every log so the next start needs no recovery."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self._grpc.stop(grace).wait()
        self.broker.close()
        log.info("broker %d stopped cleanly", self.broker.node_id)

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
        self.start()

    def stop(self, grace: float = 1.0) -> None:
        super().stop(grace)
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None
