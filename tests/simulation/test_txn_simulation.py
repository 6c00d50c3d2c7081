"""The transaction coordinator (the real ``TransactionRuntime`` and ``TransactionShard``) over random
histories of several transactional ids, producer instances, zombies, marker failures, failed
writes, timeouts, expiry, epoch exhaustion and failovers, against a reference model of Kafka's rules
(``txn_sim.py`` has the events and the invariants, ``txn_model.py`` the model). Hypothesis draws
histories (derandomized: the same examples every run) and shrinks a failing one to its events.

    RIVERLOG_SIM_SEEDS=5000 pytest tests/simulation/test_txn_simulation.py   # more seeded histories
    RIVERLOG_SIM_SEED=123 pytest tests/simulation/test_txn_simulation.py     # replay one, with its trace
"""
from __future__ import annotations

import logging

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from broker.errors import InvalidTxnTimeoutError
from broker.proto import riverlog_pb2 as pb
from broker.server.txn_handlers import TransactionHandlers
from broker.transaction import coordinator
from tests.simulation.seeds import ONE_SEED, check_every_seed
from tests.simulation.txn_sim import OP_POOL, OPS, ModelFailure, Sim, Stats, random_ops, run, run_seed

pytestmark = pytest.mark.simulation

THIS_TEST = "tests/simulation/test_txn_simulation.py::test_the_coordinator_follows_the_model_for_every_seed"


def ops(*events: tuple[str, int]) -> list[tuple[int, int]]:
    return [(OPS.index(name), arg) for name, arg in events]


#: Id "c" starts at epoch MAX_EPOCH - 1: a new instance takes the last epoch, opens a transaction,
#: and the next instance's fence needs one more (MAX_EPOCH + 1): the abort is written under the old
#: producer id, then the instance gets a new producer id at epoch 0 (Kafka's prepareFenceProducerEpoch,
#: then prepareProducerIdRotation). The fenced one's EndTxn names the old producer id
#: (INVALID_PRODUCER_ID_MAPPING, as Kafka) and its KIP-360 bump is PRODUCER_FENCED.
EXHAUSTED_WHILE_OPEN = ops(("init", 8), ("add", 14), ("produce", 2), ("init", 8), ("commit", 14), ("bump", 14))
#: A commit's marker reaches t-0 but not t-1 (node 1 down); a new coordinator takes over and sends
#: both again; the deposed one retries t-1 and is refused its coordinator epoch, so it stops.
DEPOSED_RETRIES = ops(("init", 6), ("add", 12), ("produce", 12), ("fault", 4), ("commit", 3), ("failover", 0),
                      ("fault", 3), ("tick", 0), ("deposed_tick", 0))
#: A KIP-360 bump whose answer is lost is asked again with the replaced pair: the same epoch, no
#: change; then the transaction times out, the coordinator bumps the epoch and a retry of that old
#: pair (or an EndTxn of the timed-out producer) is PRODUCER_FENCED.
BUMP_RETRY_THEN_TIMEOUT = ops(("init", 6), ("bump", 3), ("bump", 0), ("add", 12), ("tick", 4), ("commit", 3),
                              ("bump", 0))

#: A KIP-360 bump, then the bumped epoch opens a transaction; a late copy of the bump (the replaced
#: pair) is PRODUCER_FENCED, and the open transaction is untouched.
LATE_BUMP_RETRY = ops(("init", 6), ("bump", 3), ("add", 12), ("bump", 0))


def replay(history) -> Sim:
    trace: list[str] = []
    try:
        return run(history, trace, trace_events=200)
    except ModelFailure as failure:
        raise ModelFailure(f"{failure}\n" + "\n".join(trace[-60:]), failure.trace) from None


@pytest.fixture(autouse=True)
def _quiet():
    logging.disable(logging.WARNING)   # failed writes and markers log warnings: thousands here
    yield
    logging.disable(logging.NOTSET)


def test_the_coordinator_follows_the_model_for_every_seed():
    trace_events = 2_000 if ONE_SEED is not None else 40   # a replay tells more
    check_every_seed("Transaction coordinator", THIS_TEST, lambda seed: run_seed(seed, 50, trace_events), Stats())


@settings(max_examples=200, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(st.tuples(st.sampled_from(OP_POOL), st.integers(0, 63)), max_size=60))
@example(EXHAUSTED_WHILE_OPEN)
@example(DEPOSED_RETRIES)
@example(BUMP_RETRY_THEN_TIMEOUT)
@example(LATE_BUMP_RETRY)
def test_drawn_histories_follow_the_model(history):
    replay(history)


def test_pinned_histories_reach_what_they_are_about():
    """Guards (already matched): each pinned history does what its comment says."""
    sim = replay(EXHAUSTED_WHILE_OPEN)
    assert sim.stats.rotations == 1 and sim.stats.aborted_on_init == 1 and sim.stats.zombies_fenced == 1, sim.stats
    first, last = sim.instances["c"][1], sim.instances["c"][-1]
    assert first[1] == coordinator.MAX_EPOCH and last[1] == 0 and last[0] != first[0], sim.instances["c"]
    sim = replay(DEPOSED_RETRIES)
    assert (sim.stats.deposed_fenced, sim.stats.failovers, sim.stats.commits) == (1, 1, 1), sim.stats
    assert not sim.deposed.loaded.live
    sim = replay(BUMP_RETRY_THEN_TIMEOUT)
    assert (sim.stats.kip360_bumps, sim.stats.kip360_retries, sim.stats.timeouts) == (1, 1, 1), sim.stats
    assert sim.stats.zombies_fenced == 2, sim.stats
    sim = replay(LATE_BUMP_RETRY)
    assert (sim.stats.kip360_bumps, sim.stats.late_retries_fenced, sim.stats.kip360_retries) == (1, 1, 0), sim.stats
    assert sim.stats.aborted_on_init == 0 and sim.instances["a"][-1][1] == 1, sim   # nothing handed out


def test_a_history_replays_identically():
    history = random_ops(7, 80)
    first, second = run(history), run(history)
    assert first.stats == second.stats and len(first.env.log) > 2
    assert first.env.partition_log == second.env.partition_log and first.env.log == second.env.log


def _first_failure(seeds: int = 200) -> ModelFailure | None:
    for seed in range(seeds):
        try:
            run(random_ops(seed, 60))
        except ModelFailure as failure:
            return failure
    return None


def test_the_model_catches_a_timeout_abort_that_does_not_fence(monkeypatch):
    """The oracle has teeth: a coordinator abort that keeps the epoch (the producer that opened the
    transaction could still commit it) is caught."""
    abort = coordinator.TransactionShard.abort

    def abort_keeping_the_epoch(self, txn_id, now_ms):
        meta = self.txns.get(txn_id)
        if meta is not None and meta.state == coordinator.ONGOING:
            meta.producer_epoch -= 1
        return abort(self, txn_id, now_ms)

    monkeypatch.setattr(coordinator.TransactionShard, "abort", abort_keeping_the_epoch)
    assert _first_failure() is not None


def test_the_model_catches_a_load_that_forgets_the_bumped_pair(monkeypatch):
    """...and a coordinator that, loading ``__transaction_state``, loses the pair a KIP-360 bump
    replaced (the retry of a bump whose answer was lost would be fenced after a failover)."""
    from_value = coordinator.TransactionMetadata.from_value.__func__

    def forgetful(cls, transactional_id, raw):
        meta = from_value(cls, transactional_id, raw)
        meta.last_producer_id = meta.last_epoch = -1
        return meta

    monkeypatch.setattr(coordinator.TransactionMetadata, "from_value", classmethod(forgetful))
    failure = _first_failure()
    assert failure is not None and "loaded" in failure.message, failure


def test_init_producer_id_without_a_transaction_timeout_is_invalid():
    """Kafka's ``validateTransactionTimeoutMs``: 0 is ``INVALID_TRANSACTION_TIMEOUT`` (the handler
    used to replace it with 60 s, a timeout the producer never asked for)."""
    handlers = TransactionHandlers(Sim([]).runtime)
    with pytest.raises(InvalidTxnTimeoutError):
        handlers.init_producer_id(pb.InitProducerIdRequest(transactional_id="a"))
    reply = handlers.init_producer_id(pb.InitProducerIdRequest(transactional_id="a", transaction_timeout_ms=1))
    assert (reply.producer_epoch, reply.producer_id >= 1000) == (0, True)
