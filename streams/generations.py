"""A :class:`~streams.app.StreamsApp`'s generations: each start of a sub-topology without Spark's
checkpoint is a new generation, recorded in the compacted topic ``<application.id>-streams-generations``,
and writes under its own exactly-once owner id (``<application.id>-<sub-topology>-g<generation>``),
so that batch ids may restart. With ``exactly_once_v2`` the previous generation's pending batch is
finished first (:class:`~broker.client.ExactlyOnce`), so the state read back includes it.

A start (and each query's restart) reads the topic once (:meth:`Generations._generations_read_once`):
every sub-topology's checks use that read, plus the generations the start itself records since.
That decides as a read per check: a sub-topology's key is read before this start writes it, and
writes from a start on another ``state.dir`` at the same moment are not excluded by reading more
often either (such a write may land just after any read, as after the last).
"""
from __future__ import annotations

import time
from contextlib import contextmanager

from broker.client import Consumer, ExactlyOnce, Producer, TopicPartition
from broker.client.exactly_once import ONGOING
from streams.errors import StreamsError
from streams.interpreter import EXACTLY_ONCE_V2
from streams.topology import SubTopology

_READ_TIMEOUT_S = 60


class Generations:
    """Needs ``app``, ``client`` and ``config`` (from StreamsApp)."""

    _read_once = False                          # inside _generations_read_once()
    _known: dict[str, int] | None = None        # what this start read, with what it recorded since

    # ------------------------------------------------------------------ generations
    @property
    def _generations_topic(self) -> str:
        return f"{self.app}-streams-generations"

    @contextmanager
    def _generations_read_once(self):
        """Within: the topic is read at the first need only, and each generation recorded is added
        to that read, so a start with many sub-topologies opens one consumer, not one per check."""
        self._read_once, self._known = True, None
        try:
            yield
        finally:
            self._read_once, self._known = False, None

    def _recorded(self) -> dict[str, int]:
        """The generations the broker records: read now, or this start's read (see above)."""
        if not self._read_once:
            return self._generations()
        if self._known is None:
            self._known = self._generations()
        return self._known

    def _generations(self) -> dict[str, int]:
        c = Consumer({**self.client, "group.id": f"{self.app}-generations-reader", "enable.auto.commit": False,
                      "isolation.level": "read_committed"})
        try:
            tp = TopicPartition(self._generations_topic, 0, 0)
            low, high = c.get_watermark_offsets(tp, timeout=30)
            out: dict[str, int] = {}
            if high <= low:
                return out
            c.assign([TopicPartition(self._generations_topic, 0, low)])
            pos, deadline = low, time.monotonic() + _READ_TIMEOUT_S
            while pos < high:
                if time.monotonic() > deadline:   # never a hang: the offset below high may be gone
                    raise StreamsError(f"could not read {self._generations_topic} up to offset {high} within "
                                       f"{_READ_TIMEOUT_S} s (at {pos}); is the broker reachable?")
                for m in c.consume(500, timeout=5):
                    if m.error():
                        continue
                    out[m.key().decode()] = int(m.value())
                    pos = m.offset() + 1
            return out
        finally:
            c.close()

    def _next_generation(self, sub: SubTopology) -> int:
        gens = self._recorded()
        key = f"subtopology-{sub.id}"
        previous = gens.get(key)
        if previous is not None and self.config["processing.guarantee"] == EXACTLY_ONCE_V2:
            self._finish_pending(self._owner(sub, previous))
        generation = (previous or 0) + 1
        p = Producer({**self.client, "acks": "all"})
        p.produce(self._generations_topic, key=key.encode(), value=str(generation).encode())
        if p.flush(30):
            raise StreamsError(f"could not record generation {generation} of {key} in {self._generations_topic}")
        if self._known is not None:
            self._known[key] = generation
        return generation

    def _finish_pending(self, owner: str) -> None:
        """A batch decided but not ended when the last generation stopped: end it before the state is
        rebuilt, so the changelogs and offsets read back include it. The batch after it, written but
        never decided, is aborted: its open transactions would hold every read_committed reader of
        the outputs, changelogs and repartition topics until transaction.timeout.ms (every batch of
        a Streams query records a decision, since it commits offsets, so it is the next batch id)."""
        with ExactlyOnce(self.client, owner) as eo:
            decision = eo.log.latest(owner)
            if decision is not None:
                eo.commit(decision.batch_id, decision.attempts, record=False)
            # a start waits for a coordinator still loading (a batch's commit does not)
            listing = eo.admin.list_transactions(eo.timeout, states=[ONGOING], prefix=f"{owner}-", retry_loading=True)
            eo.abort_strays(decision.batch_id + 1 if decision is not None else 0, None, listing)

    def _owner(self, sub: SubTopology, generation: int) -> str:
        return f"{self.app}-{sub.id}-g{generation}"

    def _superseded(self, sub: SubTopology, owner: str) -> bool:
        """Whether the broker records a newer generation of ``sub`` than ``owner`` (a checkpoint's):
        another start from the broker, with another ``state.dir``, has run since that checkpoint
        was written, and committed offsets and changelogs past it."""
        prefix = f"{self.app}-{sub.id}-g"
        if not owner.startswith(prefix) or not owner[len(prefix):].isdigit():
            return False
        recorded = self._recorded().get(f"subtopology-{sub.id}")
        return recorded is not None and recorded > int(owner[len(prefix):])
