"""How many state partitions a stateful query gets, so that each Kafka task has one to itself.

A stateful sub-topology groups its rows by task number (the input partition), and Spark places
group ``p`` in state partition ``pmod(murmur3(p, 42), spark.sql.shuffle.partitions)``. With
Spark's default of 200 a two-task application ran 200 state-store tasks a batch, 198 of them
empty; set to the number of tasks, tasks 0 and 1 both hash to partition 1 of 2, so one core did
all the work. :func:`state_partitions` is the smallest count from the number of tasks up in which
no two tasks share a partition (up to four times the tasks; past that, the count that separates
the most). Spark keeps a query's count in its checkpoint, so this applies to a query's first start
only. Pure: Spark's ``Murmur3_x86_32.hashInt``, written out.
"""
from __future__ import annotations

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


def spark_partition(task: int, partitions: int) -> int:
    """The state partition Spark puts task ``task`` in (``pmod`` of the hash)."""
    return murmur3_int(task) % partitions


def state_partitions(tasks: int, spread: int = 4) -> int:
    """The smallest partition count, from ``tasks`` up, that gives every task its own partition;
    none below ``spread`` times the tasks (many tasks: every count collides somewhere), the count
    in that range that separates the most tasks (the smallest of those)."""
    tasks = max(1, tasks)
    best, best_distinct = tasks, 0
    for n in range(tasks, spread * tasks + 1):
        distinct = len({spark_partition(t, n) for t in range(tasks)})
        if distinct == tasks:
            return n
        if distinct > best_distinct:
            best, best_distinct = n, distinct
    return best
