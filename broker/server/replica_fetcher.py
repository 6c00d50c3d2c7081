"""Followers pulling from leaders: one fetch thread per leader broker (Kafka's ReplicaFetcherThread).

Before fetching a partition after a leader change, the follower asks the leader where its own
latest leader epoch ends (OffsetsForLeaderEpoch) and truncates anything past that point: a tail
written under an old leader that the new leader never had (KIP-101/279). Then it fetches with
``replica_id`` set, appends the leader's batches unchanged and adopts the leader's high
watermark and log start. A fetch also tells the leader how far this follower has got, which is what
moves the leader's high watermark and keeps this replica in the ISR, and where its log starts,
which is what lets the leader answer a DeleteRecords.

A partition is fetched only in the leader epoch its truncation was done for (Kafka's
``PartitionFetchState``: fetching again needs a new truncation once the epoch moved): the
metadata thread changes a follower's epoch before it flags the partition for truncation, and a
fetch built in between must not skip the truncation. Only the metadata thread takes a partition
out of a fetcher (when it leads, stops hosting or follows another broker): the fetcher never does,
since by the time it saw an error the partition may already be following this leader again.
"""
from __future__ import annotations

import logging
import threading
import time
import weakref

from broker.errors import (FencedLeaderEpochError, NotLeaderOrFollowerError, OffsetOutOfRangeError,
                           RiverlogError, UnknownLeaderEpochError, UnknownTopicOrPartitionError, error_for_code)
from broker.partition import Partition
from broker.proto import riverlog_pb2 as pb
from broker.replication.follower import truncation_offset

log = logging.getLogger(__name__)

_WAIT_FOR_METADATA = (NotLeaderOrFollowerError, FencedLeaderEpochError, UnknownTopicOrPartitionError)


class _Unreachable(Exception):
    """The leader did not answer an OffsetsForLeaderEpoch call (not: answered with an error)."""

    def __init__(self, error: RiverlogError):
        super().__init__(str(error))
        self.error = error


class ReplicaFetcherManager:
    def __init__(self, node_id: int, config, peers, address_of, broker_epoch=lambda: None):
        """``address_of(node_id)``: the broker's host:port from metadata (None when unknown);
        ``broker_epoch()``: this broker's current registration epoch."""
        self.node_id = node_id
        self.broker_epoch = broker_epoch
        self.config = config
        self.peers = peers
        self.address_of = address_of
        self._lock = threading.Lock()
        self._threads: dict[int, ReplicaFetcher] = {}
        self._owner: dict[int, int] = {}  # id(partition) -> leader it is fetched from

    def add(self, partition: Partition, leader: int) -> None:
        with self._lock:
            thread = self._threads.get(leader)
            if thread is None or not thread.alive:
                thread = self._threads[leader] = ReplicaFetcher(self, leader)
                thread.start()
            self._owner[id(partition)] = leader
            thread.add(partition)

    def remove(self, partition: Partition) -> None:
        with self._lock:
            leader = self._owner.pop(id(partition), None)
            thread = self._threads.get(leader) if leader is not None else None
        if thread is not None:
            thread.remove(partition)

    def close(self) -> None:
        with self._lock:
            threads = list(self._threads.values())
            self._threads.clear()
        for thread in threads:
            thread.stop()


class ReplicaFetcher:
    def __init__(self, manager: ReplicaFetcherManager, leader: int):
        self.m = manager
        self.leader = leader
        self.alive = True
        self._lock = threading.Lock()
        self._partitions: dict[int, Partition] = {}
        self._needs_truncation: set[int] = set()
        self._truncated_for: dict[int, int] = {}  # id(partition) -> leader epoch it may be fetched in
        self._given: weakref.WeakSet[Partition] = weakref.WeakSet()  # every partition ever added here
        self._retry_at: dict[int, float] = {}  # id(partition) -> when a failed one is checked again
        self._changed = threading.Event()
        self._stop = threading.Event()
        self._stub = (None, None)  # (address, stub): a stub per fetch costs a method table each time
        self._thread = threading.Thread(target=self._run, name=f"riverlog-fetcher-{leader}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.alive = False
        self._stop.set()
        self._changed.set()

    def add(self, partition: Partition) -> None:
        with self._lock:
            self._partitions[id(partition)] = partition
            self._needs_truncation.add(id(partition))
            self._truncated_for.pop(id(partition), None)
            self._given.add(partition)
        self._changed.set()

    def remove(self, partition: Partition) -> None:
        with self._lock:
            self._partitions.pop(id(partition), None)
            self._needs_truncation.discard(id(partition))
            self._truncated_for.pop(id(partition), None)
            self._retry_at.pop(id(partition), None)

    # ------------------------------------------------------------------------------ loop
    def _run(self) -> None:
        backoff = self.m.config["replica.fetch.backoff.ms"] / 1000.0
        while not self._stop.is_set():
            with self._lock:
                partitions = dict(self._partitions)
                truncate = [partitions[k] for k in self._needs_truncation if k in partitions]
            if not partitions:
                self._changed.wait(0.5)
                self._changed.clear()
                continue
            address = self.m.address_of(self.leader)
            if address is None:
                self._stop.wait(backoff)
                continue
            try:
                if truncate:
                    self._truncate(address, truncate)
                self._fetch(address, [p for k, p in partitions.items() if k not in self._needs_truncation])
            except RiverlogError as e:
                log.debug("fetch from leader %d failed: %r", self.leader, e)
                self._stop.wait(backoff)
            except Exception:  # noqa: BLE001 - keep fetching; the error is logged
                log.exception("replica fetcher for leader %d failed", self.leader)
                self._stop.wait(backoff)

    def _truncate(self, address: str, partitions: list[Partition]) -> None:
        for p in partitions:
            if self._retry_at.get(id(p), 0.0) > time.monotonic():
                continue  # failed a moment ago (replica.fetch.backoff.ms)
            leader_epoch, _, leo = p.follower_state()

            def ask(epoch: int, p=p, leader_epoch=leader_epoch) -> tuple[int, int]:
                try:
                    reply = self.m.peers.call(address, "offset_for_leader_epoch", {"partitions": [{
                        "topic": p.topic, "partition": p.index, "leader_epoch": epoch,
                        "current_leader_epoch": leader_epoch}]}, timeout=5.0)["partitions"][0]
                except RiverlogError as e:
                    raise _Unreachable(e) from None
                if reply.get("error_code"):
                    raise error_for_code(reply["error_code"])(reply.get("error_message", ""))
                return reply["leader_epoch"], reply["end_offset"]

            try:
                offset = truncation_offset(p.epochs, leo, ask, high_watermark=p.high_watermark)
                if not p.truncate_to(offset, leader_epoch):
                    continue  # the epoch changed while we asked: the answer is stale, ask again
            except _Unreachable as e:
                raise e.error from None  # the leader is away: the round ends, the fetcher backs off
            except (UnknownLeaderEpochError,) + _WAIT_FOR_METADATA:
                continue  # the leader is not ready yet, or metadata moved on: ask again later
            except Exception as e:  # noqa: BLE001 - this partition's own failure: the others go on
                self._partition_failed(p, "could not check for divergence", e)
                continue
            if offset < leo:
                log.info("%s-%d: truncated from %d to %d after the leader epoch check",
                         p.topic, p.index, leo, offset)
            with self._lock:   # add() re-flags it after a later epoch change, under this lock
                if p.follower_state()[0] == leader_epoch and id(p) in self._partitions:
                    self._needs_truncation.discard(id(p))
                    self._truncated_for[id(p)] = leader_epoch
                    self._retry_at.pop(id(p), None)

    def _fetch(self, address: str, partitions: list[Partition]) -> None:
        if not partitions:
            self._stop.wait(0.05)
            return
        cfg = self.m.config
        request = pb.FetchRequest(replica_id=self.m.node_id, max_wait_ms=cfg["replica.fetch.wait.max.ms"],
                                  min_bytes=1, max_bytes=cfg["fetch.max.bytes"],
                                  replica_epoch=self.m.broker_epoch() or 0)
        by_topic: dict[str, pb.FetchTopic] = {}
        index: dict[tuple[str, int], Partition] = {}
        fetched: dict[tuple[str, int], tuple[int, int]] = {}  # (leader epoch, fetch offset) asked with
        for p in partitions:
            leader_epoch, _, leo = p.follower_state()
            with self._lock:   # (a partition handed in without add() is fetched as asked)
                if p in self._given and self._truncated_for.get(id(p)) != leader_epoch:
                    # removed, or its epoch moved since its truncation (add() may not have run yet)
                    if id(p) in self._partitions:
                        self._needs_truncation.add(id(p))
                    continue
            fetched[(p.topic, p.index)] = (leader_epoch, leo)
            topic = by_topic.get(p.topic) or by_topic.setdefault(p.topic, request.topics.add(name=p.topic))
            # Our log start tells the leader when a DeleteRecords is safe to acknowledge
            # (Kafka's FetchRequest.PartitionData.logStartOffset).
            topic.partitions.add(partition=p.index, fetch_offset=leo, max_bytes=cfg["replica.fetch.max.bytes"],
                                 current_leader_epoch=leader_epoch, log_start_offset=p.offsets()[0])
            index[(p.topic, p.index)] = p
        if not index:
            return
        if self._stub[0] != address:
            self._stub = (address, self.m.peers.public(address))
        try:
            response = self._stub[1].Fetch(request, timeout=cfg["replica.fetch.wait.max.ms"] / 1000 + 10)
        except Exception as e:  # noqa: BLE001 - grpc errors: the leader is away; back off
            raise NotLeaderOrFollowerError(f"fetch from leader {self.leader} at {address} failed: {e}") from None
        for tr in response.topics:
            for pr in tr.partitions:
                p = index.get((tr.name, pr.partition))
                if p is None:
                    continue
                try:
                    self._process(p, pr, fetched[(tr.name, pr.partition)])
                except Exception as e:  # noqa: BLE001 - this partition's own failure: the others go on
                    self._partition_failed(p, "could not append replicated batches", e)

    def _process(self, p: Partition, pr, fetched: tuple[int, int]) -> None:
        """One partition of a fetch answer."""
        if pr.error_code:
            if pr.error_code == OffsetOutOfRangeError.code and pr.log_start_offset > p.follower_state()[2]:
                log.info("%s-%d: the leader's log starts at %d, past this replica's end; restarting there",
                         p.topic, p.index, pr.log_start_offset)
                p.truncate_fully_and_start_at(pr.log_start_offset, fetched)
                return
            self._on_error(p, error_for_code(pr.error_code)(pr.error_message))
            return
        if pr.records:
            self._to_end(p)
        try:
            # dropped if the leader changed or the log was cut while the fetch was out
            p.append_as_follower(pr.records, pr.high_watermark, pr.log_start_offset, fetched)
        except NotLeaderOrFollowerError:
            pass  # no longer following: the metadata thread takes it out (or re-added it already)

    def _partition_failed(self, p: Partition, what: str, error: Exception) -> None:
        """One partition failed (its log, or the leader's answer for it): logged, and its
        divergence checked again, after ``replica.fetch.backoff.ms``, before it is fetched again;
        the other partitions go on."""
        log.warning("%s-%d: %s from leader %d: %r; re-checking divergence", p.topic, p.index, what,
                    self.leader, error, exc_info=not isinstance(error, RiverlogError))
        with self._lock:
            if id(p) in self._partitions:
                self._needs_truncation.add(id(p))
                self._retry_at[id(p)] = time.monotonic() + self.m.config["replica.fetch.backoff.ms"] / 1000.0

    def _to_end(self, p: Partition) -> None:
        """Fetch ``p`` last next time (Kafka's ``PartitionStates.updateAndMoveToEnd``): only a
        fetch's first partition with records may exceed what is left of ``fetch.max.bytes``, so a
        fixed order could hold a partition with a large batch behind busy ones."""
        with self._lock:
            if self._partitions.pop(id(p), None) is not None:
                self._partitions[id(p)] = p

    def _on_error(self, p: Partition, error: RiverlogError) -> None:
        if isinstance(error, OffsetOutOfRangeError):
            with self._lock:
                self._needs_truncation.add(id(p))
        elif isinstance(error, UnknownLeaderEpochError):
            pass  # the leader has not seen the new epoch yet; the next fetch will do
        elif isinstance(error, _WAIT_FOR_METADATA):
            self._stop.wait(0.05)  # metadata will move this partition; avoid a hot loop meanwhile
        else:
            log.warning("%s-%d: fetch error from leader %d: %r", p.topic, p.index, self.leader, error)
