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
from broker.errors import ClientClosedError, NetworkError, RiverlogError, error_for_code


def _error(code: int, message: str) -> RiverlogError:
    return error_for_code(code)(message)


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
