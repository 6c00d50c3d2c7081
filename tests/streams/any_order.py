"""Running the reference interpreter in any order its tasks could take."""
from __future__ import annotations

import random
from collections import deque

from streams.interpreter import Interpreter


def run_in_any_order(interp: Interpreter, rnd: random.Random, commit_chance: float = 0.0) -> None:
    """Process the interpreter's pending records in a random order that keeps each partition's
    own order: the orders Kafka's tasks, each on its own thread or machine (or a stateful query's
    Spark tasks, running at once), may take. With record caches (``Interpreter(cache_bytes=)``),
    the tasks commit after a record with ``commit_chance``, and at the end until nothing is left."""
    queues: dict[tuple, deque] = {}
    while True:
        while interp.pending or any(queues.values()):
            while interp.pending:
                topic, partition, offset = interp.pending.popleft()
                queues.setdefault((topic, partition), deque()).append(offset)
            topic, partition = rnd.choice(sorted(k for k, q in queues.items() if q))
            interp.process(topic, partition, queues[(topic, partition)].popleft())
            if rnd.random() < commit_chance:
                interp.commit()
        interp.commit()
        if not interp.pending:
            return
