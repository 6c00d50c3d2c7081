"""Where a stateful query's tasks run: one state partition per Kafka task, none left empty.

A stateful sub-topology groups its rows by a key per task, and Spark places the group of key ``k``
in state partition ``pmod(murmur3(k, 42), spark.sql.shuffle.partitions)``. Grouped by the task
number itself, tasks collide (tasks 0 and 1 both land in partition 1 of 2, so one core does all
the work), and a count that separates them leaves partitions empty (3 for 2 tasks, 7 for 4, 22
for 8): every batch then runs an empty state-store task each, which still loads and commits its
store and starts the processor (on two cores a third task is a second wave). So the query runs
with as many state partitions as tasks, and task ``t`` is grouped under a *placement key*: the
smallest integer that Spark places in partition ``t`` (:func:`placement_keys`).

A checkpoint keeps its partition count and its keys (the keys are the state's keys), so the
application keeps the keys chosen at a query's first start beside its checkpoint and reads them
back at every restart; a checkpoint made before placement keys groups by the task number
(:func:`identity`). Pure: Spark's ``Murmur3_x86_32.hashInt``, written out.
"""
from __future__ import annotations

from collections.abc import Sequence

SEED = 42      # Spark's HashPartitioning seed
_MASK = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def murmur3_int(value: int, seed: int = SEED) -> int:
    """Spark's ``Murmur3_x86_32.hashInt`` (the hash of an INT column), as a signed 32-bit int."""
    k1 = (value & _MASK) * 0xCC9E2D51 & _MASK
    k1 = _rotl(k1, 15) * 0x1B873593 & _MASK
    h1 = _rotl((seed & _MASK) ^ k1, 13)
    h1 = (h1 * 5 + 0xE6546B64) & _MASK
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _MASK
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def spark_partition(key: int, partitions: int) -> int:
    """The state partition Spark puts the group of INT key ``key`` in (``pmod`` of the hash)."""
    return murmur3_int(key) % partitions


def placement_keys(tasks: int, partitions: int | None = None, known: Sequence[int] = ()) -> tuple[int, ...]:
    """A distinct grouping key per task: ``known`` first (a checkpoint's), then for each further
    task ``t`` the smallest unused non-negative integer that Spark places in partition ``t`` of
    ``partitions`` (default: one per task), or, past the partitions (a topic that grew after the
    checkpoint was made), the smallest unused one. Distinct keys keep tasks' state apart."""
    partitions = partitions or max(1, tasks)
    keys = list(known[:tasks])
    used = set(keys)
    for t in range(len(keys), tasks):
        x = 0
        while x in used or (t < partitions and spark_partition(x, partitions) != t):
            x += 1
        keys.append(x)
        used.add(x)
    return tuple(keys)


def identity(tasks: int) -> tuple[int, ...]:
    """The keys of a checkpoint made before placement keys: each task grouped by its number."""
    return tuple(range(tasks))


def is_identity(keys: Sequence[int]) -> bool:
    return tuple(keys) == identity(len(keys))


def key_column(keys: Sequence[int], column: str = "partition") -> str:
    """SQL for the placement key of the task in ``column``; a task past ``keys`` (a partition added
    since the query started) gets a key no task has, ``-1 - task``."""
    cases = " ".join(f"WHEN {t} THEN {k}" for t, k in enumerate(keys))
    return f"CASE {column} {cases} ELSE -1 - {column} END" if cases else f"-1 - {column}"


def task_of(key: int, keys: Sequence[int]) -> int:
    """The task grouped under ``key`` (:func:`key_column`'s inverse)."""
    for t, k in enumerate(keys):
        if k == key:
            return t
    return -1 - key if key < 0 else key
