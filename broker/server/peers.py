"""Outbound calls from this node to other nodes: channels, the internal JSON call, Raft sends.

Raft messages are fire-and-forget: one sender thread per peer drains a bounded queue, so a dead or
slow peer never blocks the controller thread (Raft retransmits what is lost). Other calls are
synchronous with a deadline and raise the same typed errors as the client does.
"""
from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Callable

import grpc

from broker.client.cluster import channel_options, translate_rpc_error
from broker.errors import NetworkError, NotControllerError
from broker.proto import riverlog_pb2 as pb
from broker.proto import riverlog_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

RAFT_QUEUE = 1024


def _request(method: str, body: dict) -> pb.InternalRequest:
    return pb.InternalRequest(method=method, body=json.dumps(body).encode())


def _decoded(address: str, method: str, reply: Callable[[], pb.InternalResponse]) -> dict:
    """The JSON body of ``reply()``; a gRPC failure as the client's typed error."""
    try:
        answer = reply()
    except grpc.RpcError as e:
        raise translate_rpc_error(e, f"internal {method} to {address}") from None
    return json.loads(answer.body) if answer.body else {}


class Peers:
    def __init__(self, node_id: int):
        self.node_id = node_id
        self._lock = threading.Lock()
        self._channels: dict[str, grpc.Channel] = {}
        self._raft_queues: dict[str, queue.Queue] = {}
        self._closed = False

    def channel(self, address: str) -> grpc.Channel:
        with self._lock:
            channel = self._channels.get(address)
            if channel is None:
                channel = self._channels[address] = grpc.insecure_channel(address, options=channel_options(50, 500))
            return channel

    def public(self, address: str) -> pb_grpc.RiverlogStub:
        return pb_grpc.RiverlogStub(self.channel(address))

    def call(self, address: str, method: str, body: dict, timeout: float) -> dict:
        """One internal call; typed errors on failure."""
        stub = pb_grpc.RiverlogInternalStub(self.channel(address))
        return _decoded(address, method, lambda: stub.Call(_request(method, body), timeout=timeout))

    def call_while(self, address: str, method: str, body: dict, timeout: float,
                   still_wanted: Callable[[], bool]) -> dict:
        """:meth:`call`, given up with ``NotControllerError`` once ``still_wanted()`` turns False
        (asked every 50 ms): a call to a controller that stopped answering (paused, partitioned)
        ends when the quorum elects another, not when its deadline passes."""
        stub = pb_grpc.RiverlogInternalStub(self.channel(address))
        future = stub.Call.future(_request(method, body), timeout=timeout)
        done = threading.Event()
        future.add_done_callback(lambda _f: done.set())
        while not done.wait(0.05):
            if not still_wanted():
                future.cancel()
                raise NotControllerError(f"internal {method} to {address}: leadership moved while waiting")
        return _decoded(address, method, future.result)

    def send_raft(self, address: str, message: dict) -> None:
        with self._lock:
            q = self._raft_queues.get(address)
            if q is None:
                q = self._raft_queues[address] = queue.Queue(RAFT_QUEUE)
                threading.Thread(target=self._raft_sender, args=(address, q), daemon=True,
                                 name=f"riverlog-raft-{address}").start()
        try:
            q.put_nowait(message)
        except queue.Full:  # the peer is not keeping up; Raft will resend
            pass

    def _raft_sender(self, address: str, q: queue.Queue) -> None:
        while not self._closed:
            message = q.get()
            if message is None:
                return
            try:
                self.call(address, "raft", {"src": self.node_id, "message": message}, timeout=1.0)
            except NetworkError:
                pass
            except Exception as e:  # noqa: BLE001 - a failed send is a dropped message to Raft
                log.debug("raft send to %s failed: %r", address, e)

    def close(self) -> None:
        self._closed = True
        with self._lock:
            for q in self._raft_queues.values():
                try:
                    q.put_nowait(None)
                except queue.Full:
                    pass
            for channel in self._channels.values():
                channel.close()
            self._channels.clear()
