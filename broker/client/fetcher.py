"""The consumer's fetch threads: the thin shell around :class:`broker.client.fetch_state.FetchState`.

Each broker leading an assigned partition gets a thread that keeps one blocking long-poll Fetch in
flight (as librdkafka has a thread per broker): a quiet broker never delays another, and a broker's
next fetch goes out while the decode thread decodes the last. Responses are decoded into Arrow (no
per-record Python) and queued until ``queued.max.messages.kbytes``, in arrival order: each gets a
ticket when it arrives and is applied in ticket order. A small response with nothing before it still
to apply is decoded on its broker thread at once (a hand-off to the decode thread costs a wake-up
and a GIL hand-over, more than decoding a few records); large ones go to the decode thread, so a
bulk reader's next fetch is in flight while it decodes. Every decision — what to fetch, what a
response or an error does to a partition — is the fetch state's; this module only moves bytes and
threads, under the consumer's lock (``cond``, notified when the application has something new).

A partition assigned without an offset (``OFFSET_STORED``/``OFFSET_INVALID``) starts at its group's
committed offset, asked of the coordinator (``committed``), and at ``auto.offset.reset`` only when
none is committed, as librdkafka's ``rd_kafka_assignment_serve_pending`` and Kafka's
``ConsumerCoordinator.initWithCommittedOffsetsIfNeeded``. A partition whose start offset cannot be
found for good gets an error event of its own; the other partitions of the broker fetch on.
"""
from __future__ import annotations

import logging
import queue
import threading
import time

import grpc

from broker.client.cluster import ClusterClient, translate_rpc_error
from broker.client.fetch_state import FetchState
from broker.client.message import OFFSET_INVALID, OFFSET_STORED
from broker.client.start_offsets import EARLIEST, OFFSET_TAIL_BASE, tail_start
from broker.errors import ClientClosedError, RiverlogError, UnknownTopicOrPartitionError, error_for_code
from broker.proto import riverlog_pb2 as pb
from broker.records.reader import batch_epochs, decode_available, next_fetch_offset

log = logging.getLogger(__name__)

INLINE_DECODE_BYTES = 64 << 10  # a response this small is decoded on its broker thread (see above)


def list_offset(cluster: ClusterClient, config, topic: str, partition: int, timestamp: int,
                timeout: float | None = None) -> tuple[int, int, int]:
    """(offset, timestamp, leader epoch or -1) from the partition's leader for a ListOffsets timestamp (-2 earliest,
    -1 latest, else ms). Leadership may be moving: retriable errors refresh metadata and try again
    until the deadline (60 s without a timeout). Each try waits at most ``request.timeout.ms``, as
    Kafka's requests do, so a leader that stopped answering (SIGSTOP, a hung machine) costs one
    request's time, and the next try asks the leader elected meanwhile."""
    request = pb.ListOffsetsRequest(
        isolation_level=1 if config["isolation.level"] == "read_committed" else 0,
        topics=[pb.ListOffsetsTopic(name=topic, partitions=[
            pb.ListOffsetsPartition(partition=partition, timestamp=timestamp)])])
    deadline = time.monotonic() + (60.0 if timeout is None else timeout)
    while True:
        try:
            node = cluster.leader(topic, partition)
            remaining = max(deadline - time.monotonic(), 0.1)
            response = cluster.call("ListOffsets", request, node, min(remaining, config["request.timeout.ms"] / 1000.0))
            r = response.topics[0].partitions[0]
            if r.error_code:
                raise error_for_code(r.error_code)(r.error_message)
            return r.offset, r.timestamp, r.leader_epoch
        except RiverlogError as e:
            if not e.retriable or time.monotonic() >= deadline:
                raise
        time.sleep(min(config["retry.backoff.ms"] / 1000.0, max(0.0, deadline - time.monotonic())))
        refresh_quietly(cluster)


def refresh_quietly(cluster: ClusterClient) -> None:
    try:
        cluster.refresh()
    except RiverlogError:
        pass


class Fetcher:
    """Starts with the consumer, stops at :meth:`close`; owns no state but its threads."""

    def __init__(self, cluster: ClusterClient, config, state: FetchState, cond: threading.Condition,
                 committed=None):
        self.cluster = cluster
        self._committed = committed  # {(topic, partition)} -> {(topic, partition): offset}; None: no group
        self.config = config
        self.state = state
        self._cond = cond
        wait_ms = config["fetch.max.wait.ms"]
        self._fetch_wait_ms = wait_ms
        self._closed = False
        self._wake = threading.Event()
        self._arrivals: queue.SimpleQueue = queue.SimpleQueue()
        self._tickets = 0  # handed out to responses as they arrive (under cond) ...
        self._applied = 0  # ... and applied in order: the next ticket to apply
        self._ordering = 0  # decoders waiting for an earlier ticket
        self._thread = threading.Thread(target=self._run, name="riverlog-fetcher", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """Room in the queue, or a partition to fetch again: let idle broker threads look now."""
        self._wake.set()

    def kick(self) -> None:
        """Wake every thread now (an assignment changed, or the consumer closes), rather than at
        their next timeout."""
        self._wake.set()
        self._arrivals.put([])

    def stop(self) -> None:
        """Ask every thread to stop; broker threads end when their fetch returns or fails."""
        self._closed = True
        self.kick()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    # ------------------------------------------------------------------------ the decode thread
    def _run(self) -> None:
        fetchers: dict[int, threading.Thread] = {}
        try:
            self._serve(fetchers)
        finally:  # a fetch still live at process exit leaves gRPC working during shutdown: wait for them
            for thread in fetchers.values():
                thread.join(5)

    def _serve(self, fetchers: dict) -> None:
        while not self._closed:
            try:
                self._start_fetchers(fetchers)
                try:
                    arrived = self._arrivals.get(timeout=0.1)
                except queue.Empty:
                    continue
                if arrived:
                    self._decode(*arrived)
            except ClientClosedError:
                return
            except Exception:  # noqa: BLE001 - keep serving; corrupt batches are events (halts), this is a bug
                log.exception("consumer decode failed")

    def _start_fetchers(self, fetchers: dict) -> None:
        with self._cond:
            keys = [k for k, s in self.state.partitions.items() if not s.paused]
        stale = False
        for key in keys:
            try:
                node = self.cluster.leader(*key)
            except UnknownTopicOrPartitionError as e:
                self._report_unknown(key, e)
                continue
            except RiverlogError:  # e.g. no leader in the metadata we hold: ask again, at most every backoff
                stale = True
                continue
            if node not in fetchers or not fetchers[node].is_alive():
                fetchers[node] = threading.Thread(target=self._run_broker, args=(node,),
                                                  name=f"riverlog-fetch-{node}", daemon=True)
                fetchers[node].start()
        if stale:
            with self._cond:
                due = self.state.refresh_due()
            if due:
                refresh_quietly(self.cluster)

    def _report_unknown(self, key, error: RiverlogError) -> None:
        refresh_quietly(self.cluster)
        if key[0] in self.cluster.topics and key[1] in self.cluster.topics[key[0]].partitions:
            return
        with self._cond:
            if self.state.stop_unknown(key, error):
                self._cond.notify_all()

    def _hand_over(self, arrived: list) -> None:
        """Give a response's data its ticket; decode it here when small and next in line."""
        small = sum(len(a[4]) for a in arrived) <= INLINE_DECODE_BYTES
        with self._cond:
            ticket = self._tickets
            self._tickets += 1
            here = small and self._applied == ticket
            if not here:  # queued under the lock: the decode thread takes tickets in order
                self._arrivals.put((arrived, ticket))
        if here:
            self._decode(arrived, ticket)

    def _decode(self, arrived: list, ticket: int) -> None:
        """Decode outside the lock, then apply under it once every earlier ticket is applied."""
        check = self.config["check.crcs"]
        committed = self.config["isolation.level"] == "read_committed"
        done = []
        try:
            for key, generation, offset, r, records, following in arrived:
                aborted = [(a.producer_id, a.first_offset) for a in r.aborted_transactions]
                decoded, failure = decode_available(records, offset, check, aborted) if records else ([], None)
                # The end a reader can reach (librdkafka's end_offset, for _PARTITION_EOF): the last
                # stable offset under read_committed, which an open transaction holds back.
                end = r.last_stable_offset if committed and r.last_stable_offset >= 0 else r.high_watermark
                # every batch's epoch, markers' and aborted ones' too: the position's once it passes them
                done.append((key, generation, offset, decoded, failure, following, end,
                             batch_epochs(records) if records else None))
        finally:
            with self._cond:
                if self._applied < ticket:
                    self._ordering += 1
                    while self._applied < ticket and not self._closed:
                        self._cond.wait(0.1)
                    self._ordering -= 1
                new = False
                try:
                    for args in done:
                        new |= self.state.on_decoded(*args)
                finally:
                    self._applied = max(self._applied, ticket + 1)
                    if new or self._ordering:
                        self._cond.notify_all()

    # ------------------------------------------------------------------------ one thread per broker
    def _run_broker(self, node: int) -> None:
        backoff = self.config["retry.backoff.ms"] / 1000.0
        while not self._closed:
            try:
                parts = self._fetchable(node)
                if not parts:
                    self._wake.wait(0.05)
                    self._wake.clear()
                    continue
                try:
                    response = self._fetch(node, parts)
                except grpc.RpcError as e:
                    raise translate_rpc_error(e, "Fetch") from None
                arrived = self._advance(response, parts)
                if arrived:
                    self._hand_over(arrived)
            except ClientClosedError:
                return
            except RiverlogError:
                if self._closed:
                    return
                self._wake.wait(backoff)
                refresh_quietly(self.cluster)
            except Exception:  # noqa: BLE001 - keep fetching; the next round retries
                log.exception("consumer fetch from broker %d failed", node)
                self._wake.wait(backoff)

    def _fetchable(self, node: int) -> list:
        """(partition, fetch offset, generation) to fetch from ``node``, after validating the
        positions of partitions whose leader epoch moved (KIP-320) and asking ListOffsets for
        partitions that have no offset yet."""
        with self._cond:
            wanted = self.state.wanted()
            assigned = list(self.state.partitions)
        # may refresh metadata: not under the lock. A partition without a leader (around an unclean
        # election) is left out of this round; the others are fetched (_start_fetchers refreshes)
        metadata = {}
        for key in wanted:
            try:
                metadata[key] = self.cluster.leader_and_epoch(*key)
            except RiverlogError:
                continue
        leaders = {key: leader for key, (leader, _) in metadata.items()}
        # Every assigned partition's epoch, not only those fetched now: while the buffer is full, a
        # grown epoch must still stop the records queued from the old leader (KIP-320).
        epochs = self._held_epochs([key for key in assigned if key not in metadata])
        epochs.update({key: epoch for key, (_, epoch) in metadata.items()})
        with self._cond:
            self.state.note_leader_epochs(epochs)
            parts, resets = self.state.to_fetch(node, lambda t, p: leaders.get((t, p), -1))
            validations = self.state.to_validate(node, lambda t, p: leaders.get((t, p), -1))
        if validations:
            self._validate(node, validations)
        committed = self._committed_of([key for key, _, offset in resets if offset in (OFFSET_STORED, OFFSET_INVALID)])
        for key, generation, offset in resets:
            if offset in (OFFSET_STORED, OFFSET_INVALID):
                if committed is None:
                    continue  # the coordinator did not answer: the next round asks again
                offset_, epoch_ = committed.get(key, (-1, -1))
                if offset_ >= 0:
                    self._resolved(parts, key, generation, offset_, epoch_, validate=True)
                    continue
            with self._cond:
                target = self.state.reset_target(key, offset, generation)
                if target is None:
                    self._cond.notify_all()
                    continue
            try:
                start, _, epoch = list_offset(self.cluster, self.config, key[0], key[1], target)
                if offset <= OFFSET_TAIL_BASE:
                    log_start, _, _ = list_offset(self.cluster, self.config, key[0], key[1], EARLIEST)
                    start, epoch = tail_start(offset, log_start, start), -1
            except RiverlogError as e:
                if e.retriable:
                    continue  # e.g. the leader moved: the next round tries again
                with self._cond:
                    if self.state.reset_failed(key, generation, e):
                        self._cond.notify_all()
                continue
            self._resolved(parts, key, generation, start, epoch)
        return parts

    def _held_epochs(self, keys: list) -> dict:
        """The leader epochs of ``keys`` in the metadata already held: never a request (a topic not
        known yet is left out), as librdkafka applies each metadata answer to every partition."""
        out = {}
        for topic, partition in keys:
            info = self.cluster.topics.get(topic)
            p = None if info is None else info.partitions.get(partition)
            if p is not None and p.leader >= 0:
                out[(topic, partition)] = p.leader_epoch
        return out

    def _validate(self, node: int, validations: list) -> None:
        """Ask ``node`` where each position's epoch ends (OffsetsForLeaderEpoch); the fetch state
        decides what the answers mean (``broker.client.offset_validation``)."""
        asked = {key: generation for key, generation, _, _ in validations}
        request = pb.OffsetForLeaderEpochRequest()
        topics: dict[str, pb.OffsetForLeaderEpochTopic] = {}
        for (topic, partition), _, epoch, current in validations:
            t = topics.get(topic) or topics.setdefault(topic, request.topics.add(name=topic))
            t.partitions.add(partition=partition, leader_epoch=epoch, current_leader_epoch=current)
        try:
            response = self.cluster.call("OffsetForLeaderEpoch", request, node,
                                         self.config["request.timeout.ms"] / 1000.0)
        except RiverlogError as e:
            with self._cond:
                for key, generation in asked.items():
                    self.state.on_validation_failed(key, generation, e)
            refresh_quietly(self.cluster)
            return
        failed = event = False
        with self._cond:
            for t in response.topics:
                for r in t.partitions:
                    key = (t.name, r.partition)
                    if key not in asked:
                        continue
                    if r.error_code:
                        failed = True
                        self.state.on_validation_failed(key, asked[key], error_for_code(r.error_code)(r.error_message))
                    else:
                        event |= self.state.on_validated(key, asked[key], r.leader_epoch, r.end_offset)
            if event:
                self._cond.notify_all()
        if failed:
            refresh_quietly(self.cluster)

    def _committed_of(self, keys: list) -> dict | None:
        """The group's committed offsets of ``keys`` ({} without a group or keys), None when the
        coordinator cannot be asked now."""
        if not keys or self._committed is None:
            return {}
        try:
            return self._committed(keys)
        except RiverlogError as e:
            log.debug("committed offsets of %s: %r", keys, e)
            return None

    def _resolved(self, parts: list, key, generation: int, offset: int, leader_epoch: int = -1,
                  validate: bool = False) -> None:
        with self._cond:
            if self.state.reset_resolved(key, generation, offset, leader_epoch, validate):
                parts.append((key, offset, generation))

    def _fetch(self, node: int, parts) -> pb.FetchResponse:
        cfg = self.config
        request = pb.FetchRequest(replica_id=-1, max_wait_ms=self._fetch_wait_ms, min_bytes=cfg["fetch.min.bytes"],
                                  max_bytes=cfg["fetch.max.bytes"],
                                  isolation_level=1 if cfg["isolation.level"] == "read_committed" else 0)
        topics: dict[str, pb.FetchTopic] = {}
        with self._cond:  # the epoch the partition's position was validated under: its leader fences others
            epochs = [self.state.leader_epoch_of(key) for key, _, _ in parts]
        for ((topic, partition), offset, _), epoch in zip(parts, epochs):
            t = topics.get(topic) or topics.setdefault(topic, request.topics.add(name=topic))
            t.partitions.add(partition=partition, fetch_offset=offset, max_bytes=cfg["max.partition.fetch.bytes"],
                             current_leader_epoch=epoch)
        timeout = self._fetch_wait_ms / 1000.0 + cfg["request.timeout.ms"] / 1000.0
        return self.cluster.stub(node).Fetch.with_call(request, timeout=timeout)[0]

    def _advance(self, response: pb.FetchResponse, parts) -> list:
        """Move fetch offsets past what arrived (headers only); return the data to decode."""
        requested = {key: (offset, gen) for key, offset, gen in parts}
        arrived = []
        refresh = False
        for t in response.topics:
            for r in t.partitions:
                key = (t.name, r.partition)
                offset, generation = requested.get(key, (0, -1))
                if r.error_code:
                    error = error_for_code(r.error_code)(r.error_message)
                    with self._cond:
                        refresh |= self.state.on_error(key, generation, error, r.log_start_offset, r.log_end_offset,
                                                       offset)
                        self._cond.notify_all()
                    continue
                records = r.records  # each read of a bytes field copies it (upb): read it once
                following = next_fetch_offset(records)
                with self._cond:
                    if not self.state.on_fetched(key, generation, r.high_watermark, r.log_start_offset, following,
                                                 offset):
                        continue
                arrived.append((key, generation, offset, r, records, following))
        if refresh:
            refresh_quietly(self.cluster)
        return arrived
