"""The consumer: confluent-kafka's API over background fetch threads that prefetch Arrow batches.

This class is the application's side only: it takes what is queued and runs the group's callbacks.
The rest is split by concept:

- ``fetch_state.py`` (pure): each assigned partition's fetch offset, position, generation and
  fetch phase, and how responses and errors move them; ``fetch_buffer.py``: the decoded chunks;
- ``fetcher.py``: one fetch thread per broker and a decode thread, around the fetch state;
- ``membership.py``: the heartbeat thread; ``committer.py``: offset commits;
- ``consumer_assignment.py``: assign/subscribe, the rebalance callbacks, seek/pause;
  ``consumer_offsets.py``: commit, store_offsets, committed, watermarks.

One lock (``_cond``) guards the fetch state; poll waits on it for the fetcher's notifications.
``seek``/``assign``/``pause`` bump a partition's generation so data fetched for an old position is
dropped, never returned. A batch that cannot be decoded halts its partition at its offset
(``fetch_state``). Every public method of a closed consumer raises :class:`ConsumerClosedError`,
a ``RuntimeError("Consumer closed")`` as confluent-kafka's.
"""
from __future__ import annotations

import logging
import threading

import pyarrow as pa

from broker.client.cluster import ClusterClient, ClusterMetadata
from broker.client.committer import OffsetCommitter
from broker.client.client_events import ClientEvents
from broker.client.config import CONSUMER_CONFIG, client_config
from broker.client.consumer_assignment import ConsumerAssignment, ConsumerGroupMetadata
from broker.client.consumer_offsets import ConsumerOffsets
from broker.client.coordinator import CoordinatorClient
from broker.client.fetch_buffer import BATCH_SCHEMA
from broker.client.fetch_state import FetchState
from broker.client.fetcher import Fetcher
from broker.client.membership import GroupMembership
from broker.client.start_offsets import AUTO_OFFSET_RESET, EARLIEST, LATEST
from broker.client.subscription import Subscription
from broker.client.message import Message
from broker.clock import SYSTEM_CLOCK
from broker.errors import ClientClosedError, KafkaError, RiverlogError

log = logging.getLogger(__name__)

__all__ = ["BATCH_SCHEMA", "Consumer", "ConsumerClosedError", "ConsumerGroupMetadata", "EARLIEST", "LATEST"]

MAX_CONSUME_MESSAGES = 1_000_000  # confluent-kafka's bound on consume(num_messages)


class ConsumerClosedError(ClientClosedError):
    """A method was called on a closed consumer: confluent-kafka's ``RuntimeError("Consumer
    closed")`` (a :class:`ClientClosedError`, so a ``RuntimeError``)."""


class Consumer(ConsumerAssignment, ConsumerOffsets):
    """confluent-kafka's ``Consumer``: ``assign`` or ``subscribe``, then ``poll``/``consume``
    (one ``Message`` at a time) or ``poll_batch`` (an Arrow table), ``commit``, ``close``.

        with Consumer({"bootstrap.servers": "127.0.0.1:9092", "group.id": "billing",
                       "auto.offset.reset": "earliest", "enable.auto.commit": False}) as c:
            c.subscribe(["orders"])
            while (msg := c.poll(1.0)) is not None:
                if msg.error() is None:
                    handle(msg.value())
                    c.commit(msg)

    ``poll()`` usually answers from memory: the fetch threads keep a long-poll in flight per broker
    and prefetch up to ``queued.max.messages.kbytes``.
    """

    _closed = True  # until __init__ ran: a subclass that skipped it gets "Consumer closed", as confluent's

    def __init__(self, config: dict | None = None, **kwargs):
        cfg = client_config(CONSUMER_CONFIG, config, kwargs)
        self.config = cfg
        self._events = ClientEvents(cfg, "consumer")
        self._auto_store = cfg["enable.auto.offset.store"]
        self.cluster = ClusterClient.from_config(cfg, self._events.error)
        self._clock = SYSTEM_CLOCK
        self._cond = threading.Condition()
        self._events.wake = self._group_wake  # error_cb runs from the poll() waiting
        self._fetch_state = FetchState(AUTO_OFFSET_RESET[cfg["auto.offset.reset"]], cfg["enable.partition.eof"],
                                       cfg["retry.backoff.ms"] / 1000.0, cfg["queued.max.messages.kbytes"] * 1024,
                                       self._clock)
        self._closed = False
        self._group_id = cfg["group.id"]
        self._coordinator = CoordinatorClient(self.cluster, self._group_id) if self._group_id else None
        self._membership: GroupMembership | None = None
        self._fatal_error: KafkaError | None = None  # set once fenced: commits and subscribe() fail with it
        self._committer = OffsetCommitter(self._coordinator, cfg, self._group_id, self._member,
                                          self._clock, self._group_wake) if self._coordinator else None
        self._callbacks: dict = {}
        self._subscription: Subscription | None = None  # set for a regex subscription
        self._owned: set[tuple[str, int]] = set()  # what the group gave this member
        self._protocol: str | None = None  # the subscription's rebalance protocol (assignment.py)
        self._assign_calls = 0  # assign-family calls, so a rebalance knows whether its callback made one
        self._fetcher = Fetcher(self.cluster, cfg, self._fetch_state, self._cond, self._committed_of
                                if self._committer is not None else None)

    def _committed_of(self, keys) -> dict:
        """For the fetcher: the group's committed offsets of partitions assigned with none, with
        their leader epochs ({key: (offset, epoch)})."""
        return self._committer.committed_offsets(keys, self.config["request.timeout.ms"] / 1000.0, with_epoch=True)

    # --------------------------------------------------------------------------- reading
    def poll(self, timeout: float | None = None) -> Message | None:
        """The next record (or error event), waiting up to ``timeout`` seconds."""
        self._check_open()
        deadline = self._deadline(timeout)
        state = self._fetch_state
        while True:
            self._group_step()
            with self._cond:
                self._check_open()
                if state.events:
                    return state.events.popleft()
                chunk = state.head()
                if state.room:
                    self._wake_fetcher()
                if chunk is not None:
                    return state.take_one(chunk)
                if not self._wait(deadline):
                    return None

    def consume(self, num_messages: int = 1, timeout: float | None = -1) -> list[Message]:
        """Up to ``num_messages`` records, waiting up to ``timeout`` s for the first."""
        self._check_open()
        if not 0 <= num_messages <= MAX_CONSUME_MESSAGES:
            raise ValueError("num_messages must be between 0 and 1000000 (1M)")
        deadline = self._deadline(timeout)
        state = self._fetch_state
        out: list[Message] = []
        while True:
            self._group_step()
            with self._cond:
                while len(out) < num_messages:
                    self._check_open()
                    if state.events:
                        out.append(state.events.popleft())
                        continue
                    chunk = self._head()
                    if chunk is None:
                        break
                    out.append(state.take_one(chunk))
                if out or not self._wait(deadline):
                    return out

    def poll_batch(self, timeout: float | None = None, max_records: int | None = None) -> pa.Table | None:
        """Every prefetched record (up to ``max_records``) as one Arrow table (``BATCH_SCHEMA``).

        Returns None when nothing arrived in time. Error events are raised, not returned: a
        partition halted at a batch it cannot decode gives the records before it first, then
        raises at the next call.
        """
        self._check_open()
        deadline = self._deadline(timeout)
        state = self._fetch_state
        parts = []
        taken = 0
        while not parts:
            self._group_step()
            with self._cond:
                while True:
                    self._check_open()
                    if state.events:
                        if parts:
                            break
                        raise state.events.popleft().error().exception()
                    chunk = self._head()
                    if chunk is None:
                        break
                    if chunk.error is not None:
                        if parts:
                            break
                        raise state.take_one(chunk).error().exception()
                    n = chunk.remaining if max_records is None else min(chunk.remaining, max_records - taken)
                    parts.append(state.take_slice(chunk, n))
                    taken += n
                    if max_records is not None and taken >= max_records:
                        break
                if not parts and not self._wait(deadline):
                    return None
        return pa.Table.from_batches(parts, schema=BATCH_SCHEMA)

    def _head(self):
        chunk = self._fetch_state.head()
        if self._fetch_state.room:
            self._wake_fetcher()
        return chunk

    def _wake_fetcher(self) -> None:
        self._fetch_state.room = False
        self._fetcher.wake()  # room in the queue

    def _deadline(self, timeout: float | None) -> float | None:
        if timeout is None or timeout < 0:
            return None
        return self._clock.monotonic() + timeout

    def _wait(self, deadline: float | None) -> bool:
        remaining = None if deadline is None else deadline - self._clock.monotonic()
        if remaining is not None and remaining <= 0:
            return False
        if self._events.pending:
            return True  # an error for error_cb came after this round's group step: serve it first
        membership = self._membership  # waiting in poll() is polling (max.poll.interval.ms)
        if membership is not None:
            membership.blocking(True)
        try:
            self._cond.wait(remaining)
        finally:
            if membership is not None:
                membership.blocking(False)
        return True

    def _check_open(self) -> None:
        if self._closed:
            raise ConsumerClosedError("Consumer closed")

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        self._check_open()
        return self.cluster.snapshot([topic] if topic else None, None if timeout < 0 else timeout)

    # --------------------------------------------------------------------------- lifecycle
    def close(self) -> None:
        """Leave the group (committing positions first when ``enable.auto.commit``, those of an
        ``assign()`` consumer too), then stop;
        ``on_commit`` runs for the asynchronous commits that were still outstanding."""
        if "_cond" not in self.__dict__:
            return  # __init__ never ran: nothing to close
        if not self._closed and self._membership is not None:
            try:
                self.unsubscribe()
            except RiverlogError as e:
                log.warning("leaving the group on close failed: %r", e)
        elif not self._closed:
            self._commit_leaving()  # an assign() consumer's positions; waited for just below
        if self._committer is not None:
            self._committer.close()
        with self._cond:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        self._fetcher.stop()
        self.cluster.close()
        self._fetcher.join(5)
        self._events.close()
        if self._committer is not None:
            self._committer.serve()  # on_commit for the commits close() waited for

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
