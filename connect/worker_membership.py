"""What the worker's membership of its ``group.id`` (:mod:`connect.worker_lease`) means for its
connectors, mixed into :class:`~connect.worker.Worker`: once it is lost, every query stops and
every request that would change a connector is refused; when it is lost or left, the UNASSIGNED
statuses are written so that a newer owner's stay.

Apart from the lifecycle because these are the rules of one fact, whether this worker still owns
the group; they move states only through the worker's ``_unassign_all``, so the state tables stay
checked in one place.
"""
from __future__ import annotations

import logging
import time

from connect.errors import ConflictError
from connect.storage_format import Status

log = logging.getLogger("connect.worker")  # the worker's logger, as before the split


class WorkerMembership:
    """Needs ``_lock``, ``_lease``, ``_lease_lost_at``, ``_unassign_all``, ``config``, ``storage`` and
    ``worker_id`` (from Worker)."""

    def _lease_lost(self) -> None:
        """The group was taken from this worker while it ran (no heartbeat got through for a
        session, so the coordinator expired it): another worker may be running the connectors now,
        so every query here stops, as Kafka's worker stops its tasks when it falls out of the group,
        and :meth:`_require_member` refuses every request that would start one again."""
        log.error("Connect worker %s lost its membership of group.id '%s': stopping every connector; "
                  "restart this worker to run them again", self.worker_id, self.config.group_id)
        self._lease_lost_at = time.time()     # GET /health answers unhealthy from now on, naming it
        with self._lock:
            statuses = self._unassign_all()
        self._put_unassigned(statuses, refresh=True)    # unlocked: reading still answers meanwhile

    def _put_unassigned(self, statuses: list[Status], refresh: bool = False) -> None:
        """Write them by ``putSafe`` (``refresh``: against connect-status read afresh, as another
        worker may own the group now), so a newer owner's statuses stay. Best effort: a worker
        leaves even when the broker is gone, and after a refused write it tries no more."""
        try:
            if refresh and statuses:
                self.storage.status_log.read_to_end(self.storage.statuses)
            for status in statuses:
                self.storage.put_status_safe(status)
        except Exception:  # noqa: BLE001 - see the docstring
            log.warning("could not write the UNASSIGNED statuses of worker %s", self.worker_id, exc_info=True)

    def _require_member(self) -> None:
        """Refuse a request that would start a query or write a connector's config, target state,
        offsets or topics once the group was lost: another worker may run the connectors now, and
        a Kafka worker outside its group cannot change them either (409, as Kafka's conflict)."""
        if self._lease is not None and not self._lease.held:
            raise ConflictError(f"Connect worker {self.worker_id} lost its membership of group.id "
                                f"'{self.config.group_id}': another worker may run its connectors now, so it "
                                f"changes none of them; restart this worker to run them again")
