"""The delivery reports a producer owes the application: the sender thread settles each batch
(:meth:`DeliveryQueue.settle`), the application's thread runs the callbacks in ``poll()`` and
``flush()`` (:meth:`DeliveryQueue.serve`), as confluent-kafka runs them.

Kept apart from the producer because settling has an order that matters: first the producer's
state takes the failure (a transaction becomes abortable, an idempotent producer's fatal error is
set, as librdkafka's ``rd_kafka_set_fatal_error``), only then do the records count as settled, so a
``flush()`` that sees them settled never finds the transaction still committable (Kafka's
``Sender.failBatch``). What each record's callback receives is :mod:`broker.client.delivery_report`.
"""
from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable

from broker.client.accumulator import RecordAccumulator
from broker.client.client_events import ClientEvents
from broker.client.delivery_report import delivery_reports
from broker.client.producer_batch import ProducerBatch
from broker.client.transactions import TransactionManager
from broker.errors import ApplicationRecoverableError, InvalidProducerIdMappingError
from broker.errors.kafka_error import KafkaError

log = logging.getLogger("broker.client.producer")


class DeliveryQueue:
    """Delivery reports waiting for the application's thread; ``len()`` counts them.

    ``fatal_error``: an idempotent producer's fatal error (its sequence numbers and the broker's
    parted), as librdkafka's ``_FATAL``: set once it is reported, raised by ``produce()`` from then on.
    """

    def __init__(self, acc: RecordAccumulator, events: ClientEvents, manager: TransactionManager | None,
                 transactional: bool, only_errors: bool):
        self._acc = acc
        self._events = events
        self._manager = manager
        self._transactional = transactional
        self._only_errors = only_errors
        self.fatal_error: KafkaError | None = None
        self._reports: collections.deque = collections.deque()
        self._cond = threading.Condition()

    def __len__(self) -> int:
        return len(self._reports)

    def settle(self, batch: ProducerBatch, error, base_offset: int = -1, log_append_time: int = -1) -> None:
        """The sender's verdict on a batch: queue its callbacks for poll(), release its memory."""
        reports = []
        manager = self._manager
        if isinstance(error, InvalidProducerIdMappingError) and manager and manager.transactional:
            error.reported_as(fatal=False)  # the coordinator forgot the producer: abortable, then a new id
        try:
            # First the producer's state, then the records settle (see the module's docstring).
            if error is not None and manager is not None:
                manager.failed(error)
            if isinstance(error, ApplicationRecoverableError) and error.args[0].fatal():
                self._events.error(error)
            elif error is not None and not self._transactional and manager is not None \
                    and error is manager.fatal_error and self.fatal_error is None:
                # librdkafka's rd_kafka_set_fatal_error: error_cb hears _FATAL once, and produce() and
                # produce_batch() raise it from then on (records taken meanwhile fail with the error).
                self.fatal_error = KafkaError(KafkaError._FATAL, f"Fatal error: {error}", fatal=True)
                self._events.error(self.fatal_error)
        finally:
            if batch.callbacks is not None and (error is not None or not self._only_errors):
                reports = delivery_reports(batch, error, base_offset, log_append_time)
            self._acc.release(batch.size_charged, batch.count - len(reports))
            if reports:
                with self._cond:
                    self._reports.extend(reports)
                    self._cond.notify_all()
        if error is not None and batch.callbacks is None:
            log.warning("failed to deliver %d record(s) to %s[%d]: %s", batch.count, batch.topic,
                        batch.partition, error)

    def serve(self, timeout: float | None, idle: Callable[[], bool]) -> int:
        """Run the queued callbacks; with none queued and ``idle()`` true, wait up to ``timeout`` s
        (negative: forever) for one first. Returns how many ran."""
        with self._cond:
            if not self._reports and idle() and timeout:
                self._cond.wait(None if timeout < 0 else timeout)
            reports, self._reports = self._reports, collections.deque()
        served = 0
        try:
            while reports:
                cb, err, msg = reports.popleft()
                served += 1
                cb(err, msg)
        finally:
            # A raising callback ends this poll, as with confluent-kafka: the reports after it wait
            # for the next poll()/flush(), still counted by len().
            if reports:
                with self._cond:
                    self._reports.extendleft(reversed(reports))
            if served:
                self._acc.release(0, served)
        return served

    def wake(self) -> None:
        """Wake a ``serve()`` waiting (an error event for ``error_cb`` arrived)."""
        with self._cond:
            self._cond.notify_all()
