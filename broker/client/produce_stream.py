"""One ordered ProduceStream call to a broker: the producer's connection, as a Kafka client's.

Requests go in a queue and the broker answers strictly in order; a reader thread matches each answer
to the oldest unanswered request and hands it to ``on_event(node, [(batches, response)], None)``.
When the stream breaks, every unanswered request is reported failed at once, in order
(``on_event(node, [(batches, None), ...], error)``), and the sender replaces the stream. I/O only:
what to send and what a failure means is :mod:`broker.client.send_policy`'s.

A broker that stops answering (frozen, or gone without closing the connection) must not hold the
producer's records forever: as librdkafka fails a request unanswered past its timeout (its
``socket.timeout.ms``, twice ``request.timeout.ms`` by default) and retries it, a watchdog cancels
the stream when its oldest request has had no answer for ``patience(request.timeout.ms)`` since it
was sent or since the previous answer (whichever is later: the broker answers a stream's requests
in order, each within ``request.timeout.ms`` of starting it). Its requests fail with
KafkaTimeoutError, which the policy retries like a broken stream; a record whose delivery.timeout.ms
passes meanwhile is reported ``_MSG_TIMED_OUT``, as librdkafka translates a request timeout.
"""
from __future__ import annotations

import collections
import queue
import threading
import time

import grpc

from broker.client.cluster import translate_rpc_error
from broker.errors import KafkaTimeoutError, NetworkError, RiverlogError


def patience(timeout_ms: int) -> float:
    """Seconds a stream waits for its oldest request's answer before it is given up: twice the
    request's ``timeout_ms`` (the broker's own wait for acks), at least one second more."""
    return (timeout_ms + max(timeout_ms, 1000)) / 1000.0


class ProduceStream:
    """One ordered ProduceStream call to a broker: requests go in a queue, answers come back in order.

    A reader thread matches each answer to the oldest unanswered request. When the stream breaks,
    every unanswered request is reported failed at once (in order) and the stream is replaced.
    """

    def __init__(self, node: int, stub, on_event):
        self.node = node
        self.on_event = on_event
        self.dead = False
        self.timed_out = False  # the watchdog cancelled the call: the broker stopped answering
        self._closed = False
        self._requests: queue.SimpleQueue = queue.SimpleQueue()
        self._pending: collections.deque = collections.deque()  # (id, batches, sent at, timeout_ms)
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._answered_at = 0.0
        self._next_id = 0
        self._call = stub.ProduceStream(iter(self._requests.get, None))
        self._reader = threading.Thread(target=self._read, name=f"riverlog-produce-{node}", daemon=True)
        self._reader.start()
        self._watchdog = threading.Thread(target=self._watch, name=f"riverlog-produce-watch-{node}", daemon=True)
        self._watchdog.start()

    def send(self, request, batches) -> None:
        with self._lock:
            if self.dead:  # the reader already failed everything pending; fail this one too
                dead = True
            else:
                dead = False
                self._next_id += 1
                request.correlation_id = self._next_id
                self._pending.append((self._next_id, batches, time.monotonic(), request.timeout_ms))
                self._requests.put(request)
                self._cond.notify()
        if dead:
            self.on_event(self.node, [(batches, None)], NetworkError("the produce stream broke"))

    def _read(self) -> None:
        try:
            for response in self._call:
                with self._lock:
                    correlation, batches = self._pending[0][:2] if self._pending else (None, None)
                    if response.correlation_id != correlation:  # it stays pending: failed below
                        raise NetworkError(f"produce stream answered request {response.correlation_id} "
                                           f"while {correlation} was next")
                    self._pending.popleft()
                    self._answered_at = time.monotonic()
                    self._cond.notify()
                self.on_event(self.node, [(batches, response)], None)
            error: RiverlogError = NetworkError("the broker closed the produce stream")
        except grpc.RpcError as e:
            error = translate_rpc_error(e, "ProduceStream")
        except RiverlogError as e:
            error = e
        with self._lock:
            if self.timed_out:
                error = self._timeout_error()
            self.dead = True
            failed = [(batches, None) for _, batches, *_ in self._pending]
            self._pending.clear()
            self._cond.notify()
        self._requests.put(None)
        if failed:
            self.on_event(self.node, failed, error)

    def _watch(self) -> None:
        """Cancel the call once the oldest request has waited past its patience (see the module)."""
        with self._cond:
            while not (self.dead or self._closed):
                if not self._pending:
                    self._cond.wait()
                    continue
                _, _, sent, timeout_ms = self._pending[0]
                left = max(sent, self._answered_at) + patience(timeout_ms) - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                self.timed_out = True
                call = self._call
                break
            else:
                return
        if call is not None:
            call.cancel()   # the reader ends and fails every pending request with _timeout_error

    def _timeout_error(self) -> KafkaTimeoutError:
        timeout_ms = self._pending[0][3] if self._pending else 0
        return KafkaTimeoutError(f"broker {self.node} left a produce request unanswered for "
                                 f"{int(patience(timeout_ms) * 1000)} ms (request.timeout.ms={timeout_ms}): "
                                 "its stream was cancelled")

    def in_flight(self) -> list:
        """The batches of every request not answered yet."""
        with self._lock:
            return [batch for _, batches, *_ in self._pending for _, taken in batches for batch in taken]

    def close(self, timeout: float = 5.0) -> None:
        """End the call and wait (up to ``timeout``) until its reader has seen it end.

        A call object collected during interpreter shutdown takes its lock in ``__del__``, and a
        gRPC thread frozen by the shutdown may hold that lock: the exit hangs. So the call ends, its
        reader with it, and the call is released here, while every thread still runs.
        """
        self._requests.put(None)
        with self._cond:
            self._closed = True
            self._cond.notify()
        if threading.current_thread() is not self._watchdog:
            self._watchdog.join(timeout)
        if self._call is None:
            return
        self._call.cancel()
        if threading.current_thread() is not self._reader:
            self._reader.join(timeout)
            if not self._reader.is_alive():
                self._call = None
