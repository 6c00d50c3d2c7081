"""How :class:`~broker.client.admin.AdminClient` runs a call: in the background on its one worker
thread, in the order the calls were made, one future per item named in the call, each completed
with its part of the broker's answer (a value, or the typed error rebuilt from its code).

Every admin mixin (topics, configs, records, groups, transactions) goes through ``_fan_out``;
calls addressed to a partition's leader retry through ``_at_leader`` while leadership moves.
"""
from __future__ import annotations

import time
from concurrent.futures import Future

from broker.client.admin_arguments import ADMIN_CLOSED
from broker.client.message import TopicPartition
from broker.errors import (ClientClosedError, KafkaError, KafkaException, KafkaTimeoutError, NetworkError,
                           RequestTimedOutError, RiverlogError, error_for_code)


def _error(code: int, message: str) -> RiverlogError:
    return error_for_code(code)(message)


def _has_duplicate_partitions(partitions) -> bool:
    """A partition named twice (by topic and partition, whatever the offsets), as librdkafka's
    ``rd_kafka_topic_partition_list_has_duplicates`` finds it."""
    keys = [(tp.topic, tp.partition) for tp in partitions]
    return len(set(keys)) != len(keys)


def _refused(keys, message: str, code: int = KafkaError._INVALID_ARG) -> dict:
    """A call librdkafka refuses as a whole before sending anything (``rd_kafka_admin_result_fail``):
    every future fails with ``code`` (``_INVALID_ARG``) and ``message``; nothing reaches a broker."""
    futures = {k: Future() for k in keys}
    for f in futures.values():
        f.set_exception(KafkaException(KafkaError(code, message)))
    return futures


class AdminFanOut:
    """Needs ``self.cluster``, ``self._pool`` and ``self._closed`` (from AdminClient)."""

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosedError(ADMIN_CLOSED)

    def _fan_out(self, keys, call, split):
        """Run ``call`` in the background, after every call made before it; ``split(response)``
        yields (key, error or value)."""
        self._check_open()
        futures = {k: Future() for k in keys}

        def run():
            try:
                response = call()
            except BaseException as e:  # noqa: BLE001 - every future must complete
                failed = _timed_out(e) if isinstance(e, RiverlogError) else e
                for f in futures.values():
                    f.set_exception(failed)
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

    def _at_leader(self, tp: TopicPartition, method: str, request, timeout: float | None, pick, make,
                   deadline: float | None = None):
        """``method`` at the partition's leader; ``pick(response)`` is the partition's result (with an
        error code), ``make(result)`` the value. While leadership moves (retriable errors), refresh
        and retry; returns the error, not raises it (a future per partition carries it). Everything,
        metadata lookups included, ends by ``deadline`` (else ``timeout`` from now): confluent-kafka's
        ``request_timeout`` is the whole call's."""
        if deadline is None:
            deadline = time.monotonic() + (timeout or self.cluster.timeout)
        while True:
            try:
                node = self._leader_of(tp, deadline)
                r = pick(self.cluster.call(method, request, node, _left(deadline)))
                if not r.error_code:
                    return make(r)
                error = _error(r.error_code, r.error_message)
            except RiverlogError as e:
                error = e
            if (not (error.retriable or isinstance(error, NetworkError)) or isinstance(error, RequestTimedOutError)
                    or time.monotonic() + 0.1 >= deadline):
                # the broker's REQUEST_TIMED_OUT (its operation_timeout passed) is its answer, as
                # librdkafka and Kafka's admin give it: asked again, the call would only run out of time
                return _timed_out(error)
            time.sleep(0.1)
            try:
                self.cluster.refresh([tp.topic], timeout=_left(deadline))
            except RiverlogError:
                pass

    def _leader_of(self, tp: TopicPartition, deadline: float) -> int:
        """The partition's leader; its topic's metadata, when not known yet, fetched by ``deadline``
        (not within the client's default timeout)."""
        self.cluster.topic(tp.topic, timeout=_left(deadline))
        return self.cluster.leader(tp.topic, tp.partition)


def _left(deadline: float) -> float:
    """Seconds until ``deadline``, at least a moment (a zero timeout would mean the default)."""
    return max(0.01, deadline - time.monotonic())


def _timed_out(error: RiverlogError) -> RiverlogError:
    """No broker reached before the call's deadline: ``_TIMED_OUT``, as librdkafka reports an admin
    request that ran out of time (it keeps trying to connect until then); other errors as they are."""
    if isinstance(error, NetworkError):
        timed_out = KafkaTimeoutError(f"{error.message} (no answer within the request timeout)")
        timed_out.__cause__ = error
        return timed_out
    return error
