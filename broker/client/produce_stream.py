"""One ordered ProduceStream call to a broker: the producer's connection, as a Kafka client's.

Requests go in a queue and the broker answers strictly in order; a reader thread matches each answer
to the oldest unanswered request and hands it to ``on_event(node, [(batches, response)], None)``.
When the stream breaks, every unanswered request is reported failed at once, in order
(``on_event(node, [(batches, None), ...], error)``), and the sender replaces the stream. I/O only:
what to send and what a failure means is :mod:`broker.client.send_policy`'s.
"""
from __future__ import annotations

import collections
import queue
import threading

import grpc

from broker.client.cluster import translate_rpc_error
from broker.errors import NetworkError, RiverlogError


class ProduceStream:
    """One ordered ProduceStream call to a broker: requests go in a queue, answers come back in order.

    A reader thread matches each answer to the oldest unanswered request. When the stream breaks,
    every unanswered request is reported failed at once (in order) and the stream is replaced.
    """

    def __init__(self, node: int, stub, on_event):
        self.node = node
        self.on_event = on_event
        self.dead = False
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._pending: collections.deque = collections.deque()
        self._lock = threading.Lock()
        self._next_id = 0
        self._call = stub.ProduceStream(iter(self._requests.get, None))
        self._reader = threading.Thread(target=self._read, name=f"riverlog-produce-{node}", daemon=True)
        self._reader.start()

    def send(self, request, batches) -> None:
        with self._lock:
            if self.dead:  # the reader already failed everything pending; fail this one too
                dead = True
            else:
                dead = False
                self._next_id += 1
                request.correlation_id = self._next_id
                self._pending.append((self._next_id, batches))
                self._requests.put(request)
        if dead:
            self.on_event(self.node, [(batches, None)], NetworkError("the produce stream broke"))

    def _read(self) -> None:
        try:
            for response in self._call:
                with self._lock:
                    correlation, batches = self._pending[0] if self._pending else (None, None)
                    if response.correlation_id != correlation:  # it stays pending: failed below
                        raise NetworkError(f"produce stream answered request {response.correlation_id} "
                                           f"while {correlation} was next")
                    self._pending.popleft()
                self.on_event(self.node, [(batches, response)], None)
            error: RiverlogError = NetworkError("the broker closed the produce stream")
        except grpc.RpcError as e:
            error = translate_rpc_error(e, "ProduceStream")
        except RiverlogError as e:
            error = e
        with self._lock:
            self.dead = True
            failed = [(batches, None) for _, batches in self._pending]
            self._pending.clear()
        self._requests.put(None)
        if failed:
            self.on_event(self.node, failed, error)

    def in_flight(self) -> list:
        """The batches of every request not answered yet."""
        with self._lock:
            return [batch for _, batches in self._pending for _, taken in batches for batch in taken]

    def close(self, timeout: float = 5.0) -> None:
        """End the call and wait (up to ``timeout``) until its reader has seen it end.

        A call object collected during interpreter shutdown takes its lock in ``__del__``, and a
        gRPC thread frozen by the shutdown may hold that lock: the exit hangs. So the call ends, its
        reader with it, and the call is released here, while every thread still runs.
        """
        self._requests.put(None)
        if self._call is None:
            return
        self._call.cancel()
        if threading.current_thread() is not self._reader:
            self._reader.join(timeout)
            if not self._reader.is_alive():
                self._call = None
