"""Where Spark places a stateful query's task groups: the hash against Spark's reference values
(``SELECT hash(CAST(v AS INT))``, seed 42, from Spark 4.2), and the partition count that gives
every task its own state partition."""
from __future__ import annotations

from streams.task_placement import murmur3_int, spark_partition, state_partitions

# hash(CAST(v AS INT)) for v in 0..7, 100, -1 and 2**31 - 1, as Spark computes them
SPARK_HASH = {0: 933211791, 1: -559580957, 2: 1765031574, 3: -1823081949, 4: -397064898, 5: 1023896466,
              6: -331964951, 7: 1079293707, 100: 751823303, -1: -1604776387, 2**31 - 1: 133916647}


def test_the_hash_is_sparks():
    assert {v: murmur3_int(v) for v in SPARK_HASH} == SPARK_HASH


def test_every_task_gets_a_state_partition_of_its_own():
    assert spark_partition(0, 2) == spark_partition(1, 2)      # Spark's count set to the tasks: one core idle
    for tasks in (1, 2, 3, 4, 6, 8, 12):
        n = state_partitions(tasks)
        assert n >= tasks and len({spark_partition(t, n) for t in range(tasks)}) == tasks
        assert all(len({spark_partition(t, m) for t in range(tasks)}) < tasks for m in range(tasks, n))
    many = state_partitions(64)                                  # past 4x, the count separating the most
    assert 64 <= many <= 256
