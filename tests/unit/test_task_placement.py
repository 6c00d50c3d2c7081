"""Where Spark places a stateful query's task groups: the hash against Spark's reference values
(``SELECT hash(CAST(v AS INT))``, seed 42, from Spark 4.2), and the placement keys that give every
task a state partition of its own with none left empty."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streams.task_placement import identity, is_identity, key_column, murmur3_int, placement_keys, spark_partition, \
    task_of

# hash(CAST(v AS INT)) for v in 0..7, 100, -1 and 2**31 - 1, as Spark computes them
SPARK_HASH = {0: 933211791, 1: -559580957, 2: 1765031574, 3: -1823081949, 4: -397064898, 5: 1023896466,
              6: -331964951, 7: 1079293707, 100: 751823303, -1: -1604776387, 2**31 - 1: 133916647}


def test_the_hash_is_sparks():
    assert {v: murmur3_int(v) for v in SPARK_HASH} == SPARK_HASH


def test_every_task_gets_a_state_partition_of_its_own_and_none_is_empty():
    assert spark_partition(0, 2) == spark_partition(1, 2)      # grouped by task number: one core idle
    for tasks in (1, 2, 3, 4, 6, 8, 12, 64):
        keys = placement_keys(tasks)
        assert len(set(keys)) == tasks and min(keys) >= 0
        assert [spark_partition(k, tasks) for k in keys] == list(range(tasks))
        for t, k in enumerate(keys):   # each the smallest such key
            assert all(x in keys[:t] or spark_partition(x, tasks) != t for x in range(k))
    assert placement_keys(1) == identity(1) == (0,) and is_identity((0,))
    assert placement_keys(2) == (2, 0) and not is_identity((2, 0))


def test_a_checkpoints_keys_are_kept_and_a_grown_topic_gets_keys_no_task_has():
    kept = placement_keys(2)
    grown = placement_keys(4, 2, kept)
    assert grown[:2] == kept and len(set(grown)) == 4
    assert placement_keys(3, None, identity(2))[:2] == (0, 1)       # an older checkpoint's task numbers


@given(st.integers(1, 40), st.integers(0, 60))
def test_task_of_inverts_the_key_column(tasks, task):
    keys = placement_keys(tasks)
    key = keys[task] if task < tasks else -1 - task      # what key_column gives a task past the keys
    assert task_of(key, keys) == task
    assert key_column(keys).startswith("CASE partition WHEN 0 THEN ")
    assert task_of(task, identity(tasks)) == task


def test_the_key_column_is_sql_for_every_task():
    assert key_column((2, 0)) == "CASE partition WHEN 0 THEN 2 WHEN 1 THEN 0 ELSE -1 - partition END"
    assert key_column(()) == "-1 - partition"
