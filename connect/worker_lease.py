"""One Connect worker per ``group.id``: the worker's membership of that group, as Kafka Connect's
workers are members of it. Kafka's workers of one group split its connectors among them;
Riverlog's one worker runs them all, so a second worker of a live group would run every connector
twice (a source connector writing its records twice). The membership decides which worker runs."""
from __future__ import annotations

import logging
import threading
import time

from connect.config import WorkerConfig
from connect.errors import WorkerGroupInUseError

log = logging.getLogger(__name__)


class WorkerLease:
    """The worker's membership of its ``group.id``, which Kafka Connect's workers hold as a
    ``WorkerGroupMember`` (joined through ``WorkerCoordinator``): here a consumer of that group
    subscribed to the config topic (one partition, as Kafka requires of it) with the
    ``cooperative-sticky`` assignor. The coordinator hands that partition to one member at a time
    and leaves it with its owner for as long as the owner heartbeats, so its holder is the group's
    running worker, decided by the group's state and not by clocks: of two workers starting at
    once, the one the coordinator did not give it yields. A holder that closes leaves the group at
    once; one killed with SIGKILL is expired after its ``session.timeout.ms``, and the partition
    moves to a waiting member. ``on_lost`` runs (on the lease's thread) when a holder loses the
    partition while running, e.g. its heartbeats stopped for a session and another worker may now
    hold the group.

        lease = WorkerLease(config, "host:8083").acquire()   # or WorkerGroupInUseError
        lease.close()
    """

    def __init__(self, config: WorkerConfig, worker_id: str, on_lost=None):
        from broker.client import Consumer
        self.config, self.worker_id, self._on_lost = config, worker_id, on_lost
        self.partition = (config.config_storage_topic, 0)
        self._consumer = Consumer({
            "bootstrap.servers": config.bootstrap_servers, "group.id": config.group_id, "client.id": worker_id,
            "session.timeout.ms": config.session_timeout_ms, "heartbeat.interval.ms": config.heartbeat_interval_ms,
            "max.poll.interval.ms": config.rebalance_timeout_ms,
            "partition.assignment.strategy": "cooperative-sticky",
            "enable.auto.commit": False, "auto.offset.reset": "latest"})
        self._held = threading.Event()
        self._stopping = threading.Event()
        self._error: Exception | None = None
        self._waiting_logged = False
        self._thread: threading.Thread | None = None
        self.polled_at = time.monotonic()   # when the membership's poll last returned

    @property
    def held(self) -> bool:
        return self._held.is_set()

    def stalled(self) -> str | None:
        """Why the membership's thread may no longer keep the group, or None: it ended, or its
        poll has not returned for ``max.poll.interval.ms`` (the client then leaves the group, and
        its revocation callback cannot run while the thread hangs, so ``held`` would stay set)."""
        if self._stopping.is_set() or self._thread is None:
            return None
        if not self._thread.is_alive():
            return "its group membership thread has ended"
        idle = time.monotonic() - self.polled_at
        if idle * 1000 > self.config.rebalance_timeout_ms:
            return (f"its group membership thread has not polled for {idle:.0f} s (max.poll.interval.ms="
                    f"{self.config.rebalance_timeout_ms}): the group may have expired it")
        return None

    def acquire(self) -> "WorkerLease":
        """Join the group and wait for the partition for one session (plus a heartbeat and the
        coordinator's expiry pass): a holder still there then is alive. Raises
        :class:`WorkerGroupInUseError` naming it (the membership is left first)."""
        self._consumer.subscribe([self.partition[0]], on_assign=self._assigned, on_revoke=self._taken,
                                 on_lost=self._taken)
        self._thread = threading.Thread(target=self._poll, name="connect-group-member", daemon=True)
        self._thread.start()
        c = self.config
        deadline = time.monotonic() + (c.session_timeout_ms + c.heartbeat_interval_ms) / 1000 + 2.0
        while not self._held.wait(0.05):
            if self._error is not None or time.monotonic() >= deadline:
                holder = self._holder() if self._error is None else None
                self.close()
                if self._error is not None:
                    raise self._error
                raise WorkerGroupInUseError(
                    f"Connect worker {holder or '(unknown)'} holds group.id '{c.group_id}' (it kept its "
                    f"membership for more than session.timeout.ms={c.session_timeout_ms}); one worker runs a "
                    f"group.id at a time: stop that worker first, or give this one another group.id")
        return self

    def close(self) -> None:
        """Leave the group; a waiting worker gets it at once."""
        self._stopping.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
        try:
            self._consumer.close()
        except Exception:  # noqa: BLE001 - closing twice, or the broker gone: the session expires anyway
            log.debug("closing the group membership", exc_info=True)
        self._held.clear()

    def _poll(self) -> None:
        """poll() runs the rebalance callbacks and keeps ``max.poll.interval.ms``; the config
        records it returns are the storage's to read, not the lease's."""
        while not self._stopping.is_set():
            try:
                self._consumer.poll(0.2)
            except Exception as e:  # noqa: BLE001 - e.g. a session.timeout.ms the broker refuses
                self._error = e
                self._lose()
                return
            self.polled_at = time.monotonic()

    def _assigned(self, consumer, partitions) -> None:
        if any((tp.topic, tp.partition) == self.partition for tp in partitions):
            self._held.set()
        elif not self._held.is_set() and not self._waiting_logged:  # joined with nothing: another holds it
            self._waiting_logged = True
            log.warning("Connect worker %s: another worker holds group.id '%s'; waiting up to session.timeout.ms="
                        "%d for it to leave", self.worker_id, self.config.group_id, self.config.session_timeout_ms)

    def _taken(self, consumer, partitions) -> None:
        if any((tp.topic, tp.partition) == self.partition for tp in partitions):
            self._lose()

    def _lose(self) -> None:
        if not self._held.is_set():
            return
        self._held.clear()
        if self._on_lost is not None and not self._stopping.is_set():
            self._on_lost()

    def _holder(self) -> str | None:
        """The client id (its worker id) of the member holding the partition, from the group."""
        from broker.client import AdminClient
        admin = AdminClient({"bootstrap.servers": self.config.bootstrap_servers})
        try:
            group = admin.describe_consumer_groups([self.config.group_id])[self.config.group_id].result(10)
        except Exception:  # noqa: BLE001 - the refusal names no worker then
            log.debug("describing group %s", self.config.group_id, exc_info=True)
            return None
        finally:
            admin.close()
        for m in group.members:
            parts = {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions}
            if self.partition in parts:
                return m.client_id
        return None
