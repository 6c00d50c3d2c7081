"""The producer: confluent-kafka's API over a record accumulator and one sender thread.

    p = Producer({"bootstrap.servers": "127.0.0.1:9092", "acks": "all", "linger.ms": 5})
    p.produce("orders", value=b"...", key=b"user-1", on_delivery=lambda err, msg: ...)
    p.produce_batch("orders", arrow_table)   # key/value/timestamp/headers/partition columns
    p.flush(10)

Delivery callbacks run in the application's thread, inside ``poll()`` and ``flush()``, as with
confluent-kafka. The parts, each in its own module so each can be read and tested alone:

- :mod:`~broker.client.produce_arguments`: ``produce()``'s arguments checked as confluent-kafka checks them;
- :mod:`~broker.client.accumulator`: ``produce()`` appends to per-topic buffers, which the sender
  thread drains;
- :mod:`~broker.client.producer_batch`: a drained buffer placed on partitions and cut into
  partition batches on the sender thread;
- :mod:`~broker.client.send_policy`: which batches of a partition may go now (produce order across
  retries, settling after failures, the idempotence window, sequence numbers, delivery timeout);
- :mod:`~broker.client.sender` and :mod:`~broker.client.produce_stream`: the thread and the
  ordered gRPC stream per broker that carry the policy out;
- :mod:`~broker.client.delivery_queue`: the sender's verdict on each batch, queued as delivery
  reports for ``poll()``; :mod:`~broker.client.delivery_report`: what each record's callback receives;
- :mod:`~broker.client.transactions`: the transaction state machine, which also owns the producer
  id, epoch and sequence numbers; :mod:`~broker.client.txn_requests`: its coordinator calls.

Epochs come only from the broker (InitProducerId), never from the producer itself: a producer that
needs a new one (it gave up on a batch it had sent, or a partition forgot it: KIP-360) sends its
current producer id and epoch and takes the answer. A fenced transactional producer is fatal.
"""
from __future__ import annotations

import operator
import threading
import time

import numpy as np

from broker.client.accumulator import RecordAccumulator
from broker.client.client_events import ClientEvents
from broker.client.cluster import ClusterClient, ClusterMetadata
from broker.client.config import PRODUCER_CONFIG, client_config, idempotence
from broker.client.delivery_queue import DeliveryQueue
from broker.client.produce_arguments import (as_bytes, as_header_list, as_timestamp, check_batch, check_partition,
                                             type_name)
from broker.client.producer_batch import RECORD_OVERHEAD, normalise_table, partition_column, record_bytes
from broker.client.send_policy import SendLimits
from broker.client.sender import Sender
from broker.client.transactions import TransactionManager, TxnState
from broker.client.txn_admin import TransactionHandle
from broker.client.txn_requests import TransactionRequests
from broker.clock import SYSTEM_CLOCK
from broker.errors import ClientClosedError, InvalidConfigError, KafkaException, MessageTooLargeError, RiverlogError
from broker.errors.kafka_error import KafkaError

_ACKS = {"0": 0, "1": 1, "all": -1, "-1": -1}
PARTITION_UA = -1  # librdkafka's RD_KAFKA_PARTITION_UA: "unassigned", the partitioner picks one
CLOSED_MESSAGE = "Producer has been closed"  # confluent-kafka's ERR_MSG_PRODUCER_CLOSED
_time_ns = time.time_ns


class Producer:
    """Send records to Riverlog topics, batched per partition, with delivery reports.

        with Producer({"bootstrap.servers": "127.0.0.1:9092"}) as p:
            p.produce("orders", key=b"user-1", value=b'{"total": 12}',
                      on_delivery=lambda err, msg: print(err or msg.offset()))
            p.flush(10)

    With ``transactional.id`` it writes transactions (``init_transactions``, ``begin_transaction``,
    ``commit_transaction``...); with ``acks=all`` it is idempotent by default (no duplicates from
    retries). Thread-safe: ``produce`` may be called from several threads.
    """

    def __init__(self, config: dict | None = None, **kwargs):
        cfg = client_config(PRODUCER_CONFIG, config, kwargs)
        self.config = cfg
        self._events = ClientEvents(cfg, "producer", self._statistics)
        self._max_messages = cfg["queue.buffering.max.messages"]
        self._acks = _ACKS[cfg["acks"]]
        self._idempotent = idempotence(cfg, self._acks)  # refuses what librdkafka refuses
        self._batch_size = cfg["batch.size"]
        # The largest record: message.max.bytes (librdkafka's rd_kafka_msg_new0), and max.request.size
        # when lower (Kafka's KafkaProducer.ensureValidRecordSize): a record no request can carry.
        self._max_message, self._max_name = ((cfg["max.request.size"], "max.request.size")
                                             if cfg["max.request.size"] < cfg["message.max.bytes"]
                                             else (cfg["message.max.bytes"], "message.max.bytes"))
        self._max_record = self._max_message + RECORD_OVERHEAD
        self._default_cb = cfg["on_delivery"]
        self.cluster = ClusterClient.from_config(cfg, self._events.error)
        self._acc = RecordAccumulator(cfg["linger.ms"] / 1000.0, self._batch_size, cfg["buffer.memory"],
                                      max_records=self._max_messages, batch_records=cfg["batch.num.messages"])
        self._append = self._acc.append
        # The manager exists for every idempotent producer: it owns the producer id, epoch and sequences.
        self._manager = TransactionManager(cfg["transactional.id"] or None) if self._idempotent else None
        self._reports = DeliveryQueue(self._acc, self._events, self._manager, bool(cfg["transactional.id"]),
                                      cfg["delivery.report.only.error"])
        self._report = self._reports.settle  # the sender's verdict on each batch
        self._events.wake = self._reports.wake
        self._txn = (TransactionRequests(self._manager, self.cluster, cfg, self.flush,
                                         lambda: self.purge(in_queue=True, in_flight=False))
                     if cfg["transactional.id"] else None)
        self._sender = Sender(cfg, SendLimits.from_config(cfg, self._idempotent), self._acks, self.cluster,
                              self._acc, self._report, self._manager, self._txn, SYSTEM_CLOCK)
        self._thread = threading.Thread(target=self._sender.run, name="riverlog-producer", daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------------------ transactions
    def init_transactions(self, timeout: float | None = None) -> None:
        """Get this transactional.id's producer id and a new epoch (fencing older instances, and
        aborting a transaction one of them left open)."""
        self._check_open()
        self._transactional().init(timeout)

    def begin_transaction(self) -> None:
        self._check_open()
        self._transactional().begin()

    def send_offsets_to_transaction(self, positions, group_metadata, timeout: float | None = None) -> None:
        """Commit a consumer's positions as part of this transaction (they count only if it commits)."""
        self._check_open()
        self._transactional().send_offsets(positions, group_metadata, timeout)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush, then commit: every record and offset of the transaction becomes visible at once."""
        self._check_open()
        self._transactional().end(True, timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort: records not sent yet are purged (their delivery reports say ``_PURGE_QUEUE``, as
        confluent-kafka's), those in flight are waited for; ``read_committed`` consumers never see
        this transaction's records."""
        self._check_open()
        self._transactional().end(False, timeout)

    def transaction_handle(self) -> TransactionHandle:
        """The open transaction's handle (transactional.id, producer id, epoch), with which another
        process's ``AdminClient.commit_transactions``/``abort_transactions`` ends it after this
        producer is closed: many writers, one committer (:mod:`broker.client.exactly_once`).
        Take it after ``flush()``; records produced later are not covered by a decision on it."""
        self._transactional()
        manager = self._manager
        with manager.lock:
            manager.require(TxnState.IN_TRANSACTION)
            return TransactionHandle(manager.transactional_id, manager.producer_id, manager.producer_epoch)

    def _transactional(self) -> TransactionRequests:
        if self._txn is None:
            raise InvalidConfigError("The Transactional API requires transactional.id to be configured",
                                     config="transactional.id").reported_as(kafka_code=KafkaError._NOT_CONFIGURED)
        return self._txn

    # ------------------------------------------------------------------------------ producing
    def produce(self, topic, value=None, key=None, partition=PARTITION_UA, callback=None, on_delivery=None,
                timestamp=0, headers=None):
        """Queue one record; raises BufferError (QueueFullError) when buffer.memory is used up.

        The arguments are confluent-kafka's, in its positional order; ``on_delivery`` is an alias of
        ``callback``, which wins when both are given. Only ``partition=-1`` (librdkafka's
        RD_KAFKA_PARTITION_UA) runs the partitioner: another negative partition is _UNKNOWN_PARTITION,
        raised here when the topic's metadata is known, else reported on delivery, as librdkafka's
        ``rd_kafka_msg_partitioner`` does. Arguments of the wrong type raise TypeError here, with
        confluent-kafka's messages, so a bad record never reaches the sender (where it could only fail
        in the background). The key, value and headers together must fit ``message.max.bytes``
        (librdkafka's ``rd_kafka_msg_max_wire_size``) and ``max.request.size`` (Kafka's
        ``KafkaProducer.ensureValidRecordSize``), else MessageTooLargeError (MSG_SIZE_TOO_LARGE)."""
        # The hot path of per-record producing: keep it to a few C-level operations (bytes and
        # None take no call; queue.buffering.max.messages is checked by the append, under its lock).
        if type(topic) is not str:
            raise TypeError(f"argument 1 must be str, not {type_name(topic)}")
        if type(partition) is not int:
            partition = operator.index(partition)  # TypeError: "'str' object cannot be interpreted as an integer"
        if partition != PARTITION_UA:
            check_partition(self.cluster.topics, topic, partition)
        if type(timestamp) is not int:
            timestamp = 0 if timestamp is None else as_timestamp(timestamp)
        if type(value) is bytes:
            size = len(value) + RECORD_OVERHEAD
        elif value is None:
            size = RECORD_OVERHEAD
        else:
            value = as_bytes(value)
            size = len(value) + RECORD_OVERHEAD
        if key is not None:
            if type(key) is not bytes:
                key = as_bytes(key)
            size += len(key)
        if size > self._max_record:
            raise MessageTooLargeError(
                f"record of {size - RECORD_OVERHEAD} bytes exceeds {self._max_name}={self._max_message}")
        if headers is not None:
            headers = as_header_list(headers)
            header_bytes = sum(len(k.encode()) + (0 if v is None else len(v)) for k, v in headers)
            if size + header_bytes > self._max_record:
                raise MessageTooLargeError(
                    f"record of {size - RECORD_OVERHEAD + header_bytes} bytes (key, value and headers) "
                    f"exceeds {self._max_name}={self._max_message}")
        if self._txn is not None and not self._manager.in_transaction:
            self._manager.check_can_produce()
        if self._reports.fatal_error is not None:
            raise KafkaException(self._reports.fatal_error)
        self._append(topic, key, value, timestamp or _time_ns() // 1_000_000, headers, partition,
                     callback or on_delivery or self._default_cb, size)

    def produce_batch(self, topic: str, table, partition: int = PARTITION_UA, callback=None, on_delivery=None, *,
                      timestamp: int = 0) -> int:
        """Queue many records at once; returns how many were queued.

        Positional arguments in confluent-kafka's order (topic, messages, partition, callback,
        on_delivery; ``callback`` wins when both are given); ``timestamp`` is Riverlog's, keyword-only.

        ``table``: an Arrow table or record batch (Riverlog's bulk path), or confluent-kafka's list
        of dicts (below). Arrow columns: ``value`` (binary or string, required), ``key``,
        ``timestamp`` (int64 ms or an Arrow timestamp; missing means now), ``headers``
        (list<struct<key, value>>) and ``partition`` (integer: each row's, as the dicts' below; null
        means ``partition``): rows for one partition keep their table order. Blocks up to
        ``max.block.ms`` for buffer space. ``on_delivery(err, msg)`` is called once per underlying
        batch, with the batch's first record as ``msg``. A record larger than ``produce()`` takes
        (message.max.bytes, max.request.size) raises MessageTooLargeError naming its row, and
        nothing of the table is queued: librdkafka refuses such a message on every produce path.

        A list of dicts is confluent-kafka's ``produce_batch``: each dict may have ``value``,
        ``key``, ``partition``, ``timestamp``, ``headers`` and its own ``callback``/``on_delivery``
        (else the call's); each record gets its own delivery report. A record that cannot be queued
        (queue full, too large) gets an ``_error`` entry (a KafkaError) in its dict and is not counted.

            n = p.produce_batch("orders", [{"key": b"k1", "value": b"v1"}, {"value": b"v2", "partition": 2}],
                                on_delivery=report)
        """
        if type(topic) is not str:
            raise TypeError(f"argument 1 must be str, not {type_name(topic)}")
        self._check_open()
        check_batch(table)
        on_delivery = callback or on_delivery
        if self._reports.fatal_error is not None:
            raise KafkaException(self._reports.fatal_error)
        if isinstance(table, list):
            return self._produce_dicts(topic, table, partition, on_delivery, timestamp)
        if partition != PARTITION_UA:
            check_partition(self.cluster.topics, topic, partition)
        table, partitions = partition_column(table, partition)
        batch = normalise_table(table, time.time_ns() // 1_000_000)
        self._check_sizes(batch)
        step = max(1, self._batch_size // 2)
        sizes = batch.get_total_buffer_size()
        rows_per_piece = max(1, int(batch.num_rows * step / max(1, sizes))) if sizes > step else batch.num_rows
        cb = on_delivery or self._default_cb
        for start in range(0, batch.num_rows, rows_per_piece):
            piece = batch.slice(start, rows_per_piece)
            parts = partition if partitions is None else partitions[start:start + piece.num_rows]
            self._acc.add_table(topic, piece, parts, cb, piece.get_total_buffer_size(), self.config["max.block.ms"])
        return batch.num_rows

    def _check_sizes(self, batch) -> None:
        """``produce()``'s size rule over a whole table, before any of it is queued."""
        sizes = record_bytes(batch)
        over = np.flatnonzero(sizes > self._max_message)
        if over.size:
            row = int(over[0])
            raise MessageTooLargeError(
                f"record {row} of the batch ({over.size} such record(s)) is {int(sizes[row])} bytes (key, value and "
                f"headers), more than {self._max_name}={self._max_message}; nothing of the batch was queued")

    def _produce_dicts(self, topic: str, messages: list, partition: int, on_delivery, timestamp: int) -> int:
        queued = 0
        for m in messages:
            try:
                self.produce(topic, m.get("value"), m.get("key"), m.get("partition", partition),
                             m.get("callback") or m.get("on_delivery") or on_delivery,
                             timestamp=m.get("timestamp", timestamp), headers=m.get("headers"))
            except (RiverlogError, BufferError, TypeError, OverflowError) as e:
                m["_error"] = KafkaError.of(e) if isinstance(e, RiverlogError) \
                    else KafkaError(KafkaError._INVALID_ARG, str(e))
                continue
            queued += 1
        return queued

    # ------------------------------------------------------------------------------ reports
    def poll(self, timeout: float | None = None) -> int:
        """Serve queued delivery callbacks; wait up to ``timeout`` s for one. Returns how many ran.
        Raises ClientClosedError on a closed producer, as confluent-kafka raises."""
        self._check_open()
        return self._reports.serve(timeout, lambda: not self._events.pending) + self._events.serve()

    def flush(self, timeout: float | None = None) -> int:
        """Send everything buffered now, wait for it, serving callbacks; returns records still pending.
        Raises ClientClosedError on a closed producer, as confluent-kafka raises."""
        self._check_open()
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        acc = self._acc
        with acc.cond:
            acc.flushing += 1
            acc.cond.notify_all()
        try:
            while True:
                self.poll(0)
                with acc.cond:
                    if acc.outstanding <= 0:
                        return 0
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return acc.outstanding
                    acc.cond.wait(0.05 if remaining is None else min(0.05, remaining))
        finally:
            with acc.cond:
                acc.flushing -= 1

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Drop records not delivered yet, as confluent-kafka's ``purge``: ``in_queue`` those not sent
        (their delivery reports get ``_PURGE_QUEUE``), ``in_flight`` those awaiting the broker's
        answer (``_PURGE_INFLIGHT``: the broker may still write them, and its answer is ignored).
        The reports are served by the next ``poll()``/``flush()``. ``blocking=False`` returns
        without waiting for the sender thread to have purged. A closed producer raises
        ``RuntimeError("Producer has been closed")``, as confluent-kafka's."""
        done = threading.Event()
        with self._acc.cond:
            self._check_open()
            self._sender.purges.append((in_queue, in_flight, done))
            self._acc.cond.notify_all()
        if blocking:
            while not done.wait(0.1) and self._thread.is_alive():
                pass

    def _statistics(self) -> dict:
        return _statistics_of(self)

    def __len__(self) -> int:
        """Records not delivered yet; 0 once closed (or never opened), as confluent-kafka's."""
        acc = self.__dict__.get("_acc")
        return 0 if acc is None or acc.closed else acc.outstanding

    def __getattr__(self, name):
        """A Producer whose ``__init__`` never ran (a subclass skipped it) has no private attribute:
        every call on it raises confluent-kafka's "Producer has been closed"."""
        if "_acc" not in self.__dict__ and name.startswith("_") and not name.startswith("__"):
            raise ClientClosedError(CLOSED_MESSAGE)
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __bool__(self) -> bool:
        """Always true, as confluent-kafka's (``__len__`` alone would make an idle producer falsy)."""
        return True

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        return self.cluster.snapshot([topic] if topic else None, None if timeout < 0 else timeout)

    def _check_open(self) -> None:
        if self._acc.closed:
            raise ClientClosedError(CLOSED_MESSAGE)

    def close(self, timeout: float | None = None) -> int:
        """Flush, then stop the sender and close connections; returns records left undelivered.
        Closing a closed producer does nothing (confluent-kafka's ``close``)."""
        if "_acc" not in self.__dict__ or self._acc.closed:
            return 0
        left = self.flush(timeout)
        with self._acc.cond:
            self._acc.closed = True
            self._acc.cond.notify_all()
        self._thread.join(5)
        self.cluster.close()
        self._events.close()
        return left

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _statistics_of(producer) -> dict:
    return {"msg_cnt": producer._acc.outstanding, "msg_max": producer._max_messages,
            "msg_size_max": producer.config["buffer.memory"]}
