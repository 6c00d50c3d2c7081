"""Coordinators over an internal compacted topic: the partitions this broker leads, loaded and served.

Group coordination (``__consumer_offsets``) and transaction coordination (``__transaction_state``)
work alike: a key (group id, transactional id) hashes to a partition of the internal topic; the
partition's leader is the key's coordinator and keeps the state of every key of that partition in
a pure *shard* rebuilt by replaying the partition.

A thread follows partition leadership: when this broker becomes leader of a partition it replays
it into a shard (requests for its keys meanwhile get ``CoordinatorLoadInProgress``); when it stops
leading, the shard goes (requests get ``NotCoordinator`` and clients find the new coordinator).
The same thread runs the shards' timers (:meth:`CoordinatorRuntime.tick`).

Every operation runs under its shard's lock: change the state, append the resulting records with
acks=all, answer. If the append fails the in-memory state may be ahead of the log, so the shard
is dropped and replayed again; the caller gets a retriable error.

Only replicated state is served, as Kafka's runtime reads a shard at its last committed offset: a
shard remembers the log end its state reflects (its replay's, then its last write's), and an
operation first waits for the high watermark to pass it. Records a new leader inherited beyond
its high watermark, or that a write which timed out left there, may yet be lost in a failover;
until they are replicated a request gets ``CoordinatorLoadInProgress`` (retried), never an offset
or an answer that could go back in time.
"""
from __future__ import annotations

import contextlib
import logging
import threading
from dataclasses import dataclass

from broker.errors import (CoordinatorLoadInProgressError, CoordinatorNotAvailableError, NotCoordinatorError,
                           NotLeaderOrFollowerError, RiverlogError)
from broker.group.coordinator import partition_for
from broker.partition import Partition
from broker.records.arrow_body import encode_batch, record_batch
from broker.records.batch import iter_headers
from broker.records.reader import decode_records

log = logging.getLogger(__name__)

SYNC_INTERVAL_S = 0.1
_READ_BYTES = 4 << 20


@dataclass
class _Loaded:
    shard: object
    partition: Partition
    leader_epoch: int
    lock: threading.Lock
    live: bool = True
    end: int = 0  # the log end offset the shard's state reflects


class CoordinatorRuntime:
    """Subclasses set ``topic``, ``what`` (for messages), ``thread_name``, and define
    :meth:`new_shard`, :meth:`topic_settings` and :meth:`tick`."""
    topic = ""
    what = "key"
    thread_name = "riverlog-coordinator"

    def __init__(self, broker):
        self.broker = broker
        self.config = broker.config
        self._shards: dict[int, _Loaded] = {}
        self._loading: set[int] = set()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)

    def new_shard(self, partition: int):
        raise NotImplementedError

    def topic_settings(self) -> dict:
        """num_partitions, replication_factor and configs of the internal topic."""
        raise NotImplementedError

    def tick(self, loaded: "_Loaded", now_ms: int) -> None:
        """Timers of one shard, called with its lock held."""

    def start(self) -> "CoordinatorRuntime":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(5)

    # ------------------------------------------------------------------------------ finding keys
    def find_coordinator(self, key: str) -> tuple[int, str, int]:
        """(node id, host, port) of the key's coordinator; creates the internal topic on first use."""
        image = self.broker.image
        topic = image.topics.get(self.topic)
        if topic is None:
            self.broker.controller_call("create_internal_topic", {"name": self.topic, **self.topic_settings()})
            image = self.broker.image
            topic = image.topics.get(self.topic)
            if topic is None:
                raise CoordinatorNotAvailableError(f"{self.topic} is being created")
        state = topic.partitions[partition_for(key, topic.num_partitions)]
        broker = image.brokers.get(state.leader)
        if state.leader < 0 or broker is None or broker.fenced:
            raise CoordinatorNotAvailableError(f"the coordinator of {self.what} '{key}' has no leader yet")
        return state.leader, broker.host, broker.port

    def _loaded(self, key: str) -> _Loaded:
        topic = self.broker.image.topics.get(self.topic)
        if topic is None:
            raise NotCoordinatorError(f"{self.topic} does not exist yet: find the coordinator first")
        index = partition_for(key, topic.num_partitions)
        with self._lock:
            loaded = self._shards.get(index)
            loading = index in self._loading
        if loaded is not None:
            return loaded
        if loading or topic.partitions[index].leader == self.broker.node_id:
            raise CoordinatorLoadInProgressError(f"loading the state of {self.topic}-{index}")
        raise NotCoordinatorError(f"broker {self.broker.node_id} is not the coordinator of {self.what} '{key}'")

    @contextlib.contextmanager
    def locked(self, key: str):
        """The key's loaded shard, its lock held, once its state is replicated (see the module's docstring)."""
        loaded = self._loaded(key)
        self._await_replicated(loaded)      # without the lock: other keys' operations go on
        with loaded.lock:
            if not loaded.live:
                raise NotCoordinatorError(f"broker {self.broker.node_id} just stopped coordinating '{key}'")
            if not loaded.partition.is_leader or loaded.partition.leader_epoch != loaded.leader_epoch:
                # Deposed since the last sync: its state may be behind the new leader's (a retried
                # EndTxn would be confirmed from a transaction the new coordinator has moved past).
                self._drop(loaded.shard.partition, loaded)
                raise NotCoordinatorError(f"broker {self.broker.node_id} no longer leads "
                                          f"{self.topic}-{loaded.shard.partition}: find the coordinator again")
            if loaded.partition.high_watermark < loaded.end:
                raise self._not_replicated(loaded)
            yield loaded

    def _await_replicated(self, loaded: _Loaded) -> None:
        """Wait (up to ``offsets.commit.timeout.ms``) for the high watermark to reach ``loaded.end``.
        A write holds the lock until its records are replicated or drops the shard, so once this
        returns the state under the lock is replicated unless the shard is no longer live."""
        end = loaded.end
        if loaded.partition.high_watermark >= end:
            return
        try:
            loaded.partition.wait_for_high_watermark(end, self.config["offsets.commit.timeout.ms"] / 1000.0)
        except NotLeaderOrFollowerError:
            raise NotCoordinatorError(f"lost leadership of {self.topic}-{loaded.shard.partition}") from None
        except RiverlogError as e:
            if loaded.partition.high_watermark < end:   # not e.g. an ISR shrink once it was replicated
                raise self._not_replicated(loaded, e) from None

    def _not_replicated(self, loaded: _Loaded, cause: Exception | None = None) -> CoordinatorLoadInProgressError:
        return CoordinatorLoadInProgressError(
            f"the state of {self.topic}-{loaded.shard.partition} up to offset {loaded.end} is not replicated "
            f"yet (high watermark {loaded.partition.high_watermark})" + (f": {cause}" if cause else ""))

    def run(self, key: str, fn):
        """``fn(shard) -> (result, records)`` on the key's shard; records are written before returning."""
        with self.locked(key) as loaded:
            result, records = fn(loaded.shard)
            if records:
                self._write(loaded, records)
        return result

    def read(self, key: str, fn):
        """``fn(shard) -> result`` without writing."""
        with self.locked(key) as loaded:
            return fn(loaded.shard)

    def shards(self) -> list:
        with self._lock:
            return [loaded.shard for loaded in self._shards.values()]

    def loaded_shards(self) -> list:
        with self._lock:
            return list(self._shards.values())

    def topic_sizes(self) -> dict[str, int]:
        return {name: t.num_partitions for name, t in self.broker.image.topics.items()}

    # ------------------------------------------------------------------------------ writing
    def _write(self, loaded: _Loaded, records) -> None:
        now = self.broker.clock.time_ms()
        data = encode_batch(record_batch([k for k, _ in records], [v for _, v in records], [now] * len(records)))
        try:
            info = loaded.partition.append_records(data, acks=-1)
            loaded.end = info.last_offset + 1
            loaded.partition.wait_for_replication(info, self.config["offsets.commit.timeout.ms"] / 1000.0)
        except RiverlogError as e:
            self._drop(loaded.shard.partition, loaded)
            if isinstance(e, NotLeaderOrFollowerError):
                raise NotCoordinatorError(f"lost leadership of {self.topic}-{loaded.shard.partition}") from None
            raise CoordinatorNotAvailableError(
                f"could not write the change to {self.topic}-{loaded.shard.partition}: {e}") from None

    def _drop(self, index: int, loaded: _Loaded) -> None:
        loaded.live = False
        with self._lock:
            if self._shards.get(index) is loaded:
                del self._shards[index]

    # ------------------------------------------------------------------------------ the thread
    def _run(self) -> None:
        while not self._stopped.wait(SYNC_INTERVAL_S):
            try:
                self._sync()
                self._tick()
            except Exception:  # noqa: BLE001 - the thread must survive; logged
                log.exception("%s coordination step failed", self.topic)

    def _sync(self) -> None:
        topic = self.broker.image.topics.get(self.topic)
        led: dict[int, Partition] = {}
        if topic is not None and self.broker.serving:
            for index in range(topic.num_partitions):
                try:
                    partition = self.broker.partition(self.topic, index)
                except RiverlogError:
                    continue
                if partition.is_leader:
                    led[index] = partition
        with self._lock:
            current = dict(self._shards)
        for index, loaded in current.items():
            partition = led.get(index)
            if partition is None or partition is not loaded.partition or partition.leader_epoch != loaded.leader_epoch:
                with loaded.lock:
                    self._drop(index, loaded)
        for index, partition in led.items():
            if index not in self._shards:
                self._load(index, partition)

    def _load(self, index: int, partition: Partition) -> None:
        with self._lock:
            self._loading.add(index)
        try:
            epoch = partition.leader_epoch
            shard = self.new_shard(index)
            end = partition.offsets()[2]        # nothing is appended to it until the shard is loaded
            shard.load(self._replay(partition), self.broker.clock.time_ms())
            loaded = _Loaded(shard, partition, epoch, threading.Lock(), end=end)
            with self._lock:
                if partition.is_leader and partition.leader_epoch == epoch:
                    self._shards[index] = loaded
            log.info("coordinating %s-%d", self.topic, index)
        except RiverlogError as e:
            log.warning("could not load %s-%d: %r", self.topic, index, e)
        finally:
            with self._lock:
                self._loading.discard(index)

    @staticmethod
    def _replay(partition: Partition):
        start, _, end = partition.offsets()
        offset = start
        while offset < end:
            data = partition.read(offset, _READ_BYTES, up_to_high_watermark=False).records
            following = None
            for _, header in iter_headers(data):
                following = header.next_offset
            if following is None:
                break
            for batch in decode_records(data, offset):
                yield from zip(batch.records.column(0).to_pylist(), batch.records.column(1).to_pylist())
            offset = following

    def _tick(self) -> None:
        now = self.broker.clock.time_ms()
        with self._lock:
            shards = list(self._shards.values())
        for loaded in shards:
            with loaded.lock:
                if loaded.live:
                    self.tick(loaded, now)

    def write(self, loaded: _Loaded, records) -> None:
        """Append records for a shard whose lock the caller holds (from :meth:`tick`)."""
        self._write(loaded, records)
