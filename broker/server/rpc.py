"""gRPC listeners on one asyncio event loop: a waiting request holds no thread.

Kafka's network threads multiplex every connection and hand complete requests to a pool of request
handler threads; a fetch that must wait parks in a purgatory, not on a thread. This module does the
same with grpc.aio: one ``riverlog-rpc`` thread runs the event loop that owns every listener of a
node; a request's work (an append, a read, a coordinator call) runs on a pool of ``num.io.threads``,
except a short append or read whose partition locks are free (:func:`hold_if_free`), done on the
loop itself because the two hand-offs to and from the pool cost more than the work; waiting — an
idle ``ProduceStream``, a long-polling fetch, an ``acks=all`` produce — is a coroutine awaiting, so
the number of connected clients does not bound the broker's availability.

:class:`ErrorInterceptor` is the one place where a typed error becomes a gRPC status, for unary and
streaming calls alike: the status code is the error's, and the ``riverlog-error-code`` trailer
(:data:`broker.errors.ERROR_CODE_KEY`) carries its stable code so the client rebuilds the same class.
"""
from __future__ import annotations

import asyncio
import logging
import threading
from concurrent import futures
from typing import Callable

import grpc
import grpc.aio

from broker.errors import ERROR_CODE_KEY, RiverlogError, UnknownServerError

log = logging.getLogger(__name__)


class ErrorInterceptor(grpc.aio.ServerInterceptor):
    """Turn exceptions escaping a handler into a gRPC status with the error's stable code."""

    def __init__(self):
        self._wrapped: dict[str, tuple] = {}  # method -> (its handler, the wrapped one): built once

    async def intercept_service(self, continuation, handler_call_details):
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method
        cached = self._wrapped.get(method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        wrapped = self._wrap(handler, method)
        self._wrapped[method] = (handler, wrapped)
        return wrapped

    @staticmethod
    def _wrap(handler, method: str):
        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def unary(request, context):
                try:
                    return await inner(request, context)
                except Exception as e:  # noqa: BLE001 - the client must get a typed answer
                    await _abort(context, e, method)

            return grpc.unary_unary_rpc_method_handler(
                unary, request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)
        if handler.stream_stream is not None:
            inner_stream = handler.stream_stream

            async def stream(request_iterator, context):
                try:
                    async for response in inner_stream(request_iterator, context):
                        yield response
                except Exception as e:  # noqa: BLE001
                    await _abort(context, e, method)

            return grpc.stream_stream_rpc_method_handler(
                stream, request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer)
        return handler


async def _abort(context, error: Exception, method: str):
    if isinstance(error, grpc.aio.AbortError):
        raise error
    if not isinstance(error, RiverlogError):
        log.exception("unhandled error in %s", method, exc_info=error)
        error = UnknownServerError(f"{type(error).__name__} while handling {method}; see the broker's log")
    await context.abort(grpc.StatusCode[error.grpc_status], error.message,
                        trailing_metadata=((ERROR_CODE_KEY, str(error.code)),))


class AsyncWaiter:
    """Await "has anything moved since ``sequence``?" on a thread-side notifier without a thread.

    ``notifier`` needs ``sequence`` and ``call_when_past(sequence, callback) -> cancel``; the
    callback runs on whichever thread bumped the notifier: on the loop's own thread (an append
    done on the loop) it wakes the waiter at once, from any other it schedules the wake-up.
    """

    def __init__(self, notifier):
        self.notifier = notifier

    async def wait_past(self, sequence: int, timeout: float) -> None:
        loop = asyncio.get_running_loop()
        woken = loop.create_future()
        here = threading.get_ident()

        def wake():
            if not woken.done():
                woken.set_result(None)

        def bumped():
            if threading.get_ident() == here:
                wake()
            else:
                loop.call_soon_threadsafe(wake)

        cancel = self.notifier.call_when_past(sequence, bumped)
        timer = loop.call_later(max(0.0, timeout), wake)
        try:
            await woken
        finally:
            timer.cancel()
            cancel()


def hold_if_free(locks) -> list | None:
    """Acquire every lock of ``locks`` that is free now, or none: the caller then runs short work
    on the event loop itself, saving the two thread hand-offs of the pool (each a wake-up and a
    GIL hand-over), and never blocks the loop on a lock another thread holds. The caller releases
    the returned locks."""
    held = []
    for lock in locks:
        if not lock.acquire(blocking=False):
            for h in held:
                h.release()
            return None
        held.append(lock)
    return held


class RpcLoop:
    """The event-loop thread of one node and the pool its requests' work runs on.

    ``run(fn, *args)`` (a coroutine) runs a blocking call on the pool; ``call(coro)`` runs a
    coroutine on the loop from any other thread and returns its result.
    """

    def __init__(self, io_threads: int, name: str = "riverlog"):
        self.pool = futures.ThreadPoolExecutor(max_workers=io_threads, thread_name_prefix=f"{name}-io")
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=f"{name}-rpc", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    async def run(self, fn: Callable, *args):
        return await self.loop.run_in_executor(self.pool, fn, *args)

    def call(self, coro, timeout: float | None = None):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def server(self, max_receive: int, max_send: int) -> grpc.aio.Server:
        """A grpc.aio server bound to this loop (it must be created on the loop's thread)."""
        async def make():
            return grpc.aio.server(interceptors=[ErrorInterceptor()],
                                   options=[("grpc.max_receive_message_length", max_receive),
                                            ("grpc.max_send_message_length", max_send),
                                            ("grpc.so_reuseport", 0)])
        return self.call(make())

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        self.pool.shutdown(wait=False, cancel_futures=True)
