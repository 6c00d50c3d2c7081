"""The batch read's pure planning: batch-only options, tables spread over tasks, and the peeked
pgoutput messages filtered to the committed transactions between two offsets."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.errors import InvalidConfigError
from spark_source.postgres.batch_plan import BatchOptions, parse_lsn, pending_transactions, spread_tables
from spark_source.postgres.pgoutput import Begin, Column, Commit, Insert, LogicalMessage, Relation
from tests.unit.test_pgoutput import encode

pytestmark = pytest.mark.unit
REL = Relation(16385, "public", "t", "d", (Column(True, "id", 23, -1),))


@pytest.mark.parametrize("text, lsn", [("0/16B3748", 0x16B3748), ("1/0", 1 << 32), ("23808840", 23808840),
                                       ('{"lsn": 23808840, "txId": 7}', 23808840), ('{"lsn": "0/10"}', 16)])
def test_offsets_are_lsns_in_every_form_a_user_has_them(text, lsn):
    assert parse_lsn("endingOffsets", text, "latest") == lsn
    assert parse_lsn("endingOffsets", "LATEST", "latest") is None and parse_lsn("x", None, "earliest") is None


@pytest.mark.parametrize("text", ["0/zz", "16B3748", "{}", '{"lsn": "x"}', "-5"])
def test_a_bad_offset_names_its_option(text):
    with pytest.raises(InvalidConfigError, match="startingOffsets"):
        parse_lsn("startingOffsets", text, "earliest")


def test_split_takes_the_batch_options_out_and_checks_them():
    batch, rest = BatchOptions.split({"dsn": "x", "startingOffsets": "0/10", "ENDINGOFFSETS": "0/20",
                                      "snapshot.max.threads": "3"})
    assert batch == BatchOptions(16, 32, 3) and rest == {"dsn": "x"}
    assert BatchOptions.split({})[0].given == [] and batch.given == ["startingOffsets", "endingOffsets",
                                                                     "snapshot.max.threads"]
    with pytest.raises(InvalidConfigError, match="endingOffsets"):
        BatchOptions.split({"startingOffsets": "0/20", "endingOffsets": "0/10"})
    with pytest.raises(InvalidConfigError, match="snapshot.max.threads"):
        BatchOptions.split({"snapshot.max.threads": "0"})


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text("abcdefgh", min_size=1, max_size=4), st.integers(-1, 10_000), min_size=1, max_size=12),
       st.integers(1, 6))
def test_every_table_goes_to_exactly_one_task_and_the_tasks_are_balanced(sizes, threads):
    groups = spread_tables(list(sizes.items()), threads)
    assert sorted(n for g in groups for n in g) == sorted(sizes)
    assert len(groups) == min(threads, len(sizes)) and all(list(g) == sorted(g) for g in groups)
    loads = [sum(max(sizes[n], 0) for n in g) for g in groups]
    # LPT: the heaviest task carries at most the ideal share plus one table
    assert max(loads) <= sum(loads) / len(groups) + max(max(v, 0) for v in sizes.values())


def _wal(*transactions):
    """(LSN, pgoutput payload) pairs in WAL order: each (xid, end LSN, ids) a transaction of inserts."""
    out, lsn = [], 100
    for xid, end, ids in transactions:
        if xid is None:
            out.append((end, encode(LogicalMessage(0, end, "riverlog.heartbeat", b""))))
            continue
        out += [(lsn, encode(REL)), (lsn, encode(Begin(end - 8, 0, xid)))]
        out += [(lsn + i, encode(Insert(REL.oid, (str(v).encode(),)))) for i, v in enumerate(ids)]
        out.append((end - 8, encode(Commit(0, end - 8, end, 0))))
        lsn = end
    return out


def test_only_transactions_committed_between_the_offsets_are_pending():
    wal = _wal((1, 200, [1, 2]), (2, 300, [3]), (None, 350, []), (3, 400, [4, 5]))
    got = [(t.xid, t.end_lsn, [int(c.new[0]) for c in t.changes if c.new]) for t in pending_transactions(wal, 0, 10**9)]
    assert got == [(1, 200, [1, 2]), (2, 300, [3]), (None, 350, []), (3, 400, [4, 5])]
    assert [t.xid for t in pending_transactions(wal, 200, 350)] == [2, None]
    assert [t.xid for t in pending_transactions(wal, 300, 399)] == [None]   # a commit past the end waits
    assert list(pending_transactions(wal, 400, 10**9)) == []


def test_workers_run_the_drivers_interpreter_only_when_spark_would_guess():
    from spark_source.registration import worker_python
    venv = "/venv/bin/python"
    assert worker_python({}, None, "local[2]", venv) == venv
    assert worker_python({"PYSPARK_PYTHON": "/opt/py"}, None, "local[2]", venv) is None
    assert worker_python({}, "/opt/py", "local", venv) is None                  # spark.pyspark.python
    assert worker_python({}, None, "spark://cluster:7077", venv) is None       # executors elsewhere
