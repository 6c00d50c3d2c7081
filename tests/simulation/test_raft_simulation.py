"""The controller quorum's Raft under seeded simulation (``raft_sim.py`` has the model and the
invariants), plus targeted scenarios each feature must survive.

    RIVERLOG_SIM_SEEDS=5000 pytest tests/simulation/test_raft_simulation.py   # more seeds (default 1000)
    RIVERLOG_SIM_SEED=123 pytest tests/simulation/test_raft_simulation.py     # replay one seed, with its trace
"""
from __future__ import annotations

import dataclasses
import random

import pytest

from broker.errors import NotControllerError
from broker.raft import (AppendRequest, AppendResponse, Entry, MemoryRaftStorage, RaftNode, Role, VoteRequest,
                         VoteResponse)
from broker.raft.replication import Progress, quorum_index
from tests.simulation.raft_sim import Faults, SimConfig, Simulation, SimulationFailure, Stats, run_seed
from tests.simulation.seeds import ONE_SEED, check_every_seed

pytestmark = pytest.mark.simulation

THIS_TEST = "tests/simulation/test_raft_simulation.py::test_raft_invariants_hold_for_every_seed"


def test_raft_invariants_hold_for_every_seed():
    config = SimConfig(trace_events=5_000) if ONE_SEED is not None else SimConfig()  # a replay tells more
    check_every_seed("Raft", THIS_TEST, lambda seed: run_seed(seed, config), Stats())


def test_a_seed_replays_identically():
    first, second = Simulation(11), Simulation(11)
    assert first.run() == second.run()
    assert first.committed == second.committed and list(first.trace) == list(second.trace)


def test_messages_carried_as_json_change_nothing():
    """The server carries messages as JSON; runs that push every message through it hold their
    invariants and are the very runs made without it: same stats, committed entries and trace."""
    for seed in range(30):
        plain, wired = Simulation(seed, SimConfig()), Simulation(seed, SimConfig(json_wire=True))
        assert wired.run() == plain.run(), seed
        assert wired.committed == plain.committed and list(wired.trace) == list(plain.trace), seed


class _NoElectionRestriction(RaftNode):
    def _candidate_up_to_date(self, request):
        return True


class _NoNoop(RaftNode):
    """A new leader that does not append its no-op: entries of earlier terms wait for a proposal."""

    def _become_leader(self, now_ms):
        self._set_role(Role.LEADER)
        self._leader_id, self._tally = self.node_id, None
        self._progress = {p: Progress(self.last_index + 1, now_ms) for p in self._peers}
        self._heartbeat_due = now_ms + self._heartbeat_ms
        return self._broadcast(now_ms, heartbeat=False)


@pytest.mark.parametrize("broken, why", [
    (dict(node_class=_NoElectionRestriction), "votes for candidates with stale logs"),
    (dict(keep_votes=False), "a restarted node forgets whom it voted for"),
    (dict(node_class=_NoNoop), "a new leader without a no-op entry"),
], ids=["election-restriction", "durable-vote", "no-op"])
def test_the_invariants_catch_a_broken_design(broken, why):
    config = dataclasses.replace(SimConfig(), **broken)
    for seed in range(3000):
        try:
            run_seed(seed, config)
        except SimulationFailure:
            return
    pytest.fail(f"3000 seeds and no invariant noticed a node that {why}")


# ---------------------------------------------------------------------------------- scenarios
def calm(seed: int, nodes: int, **config) -> Simulation:
    """A cluster on a reliable network, with a settled leader."""
    sim = Simulation(seed, SimConfig(node_counts=(nodes,), **config), faults=Faults.off())
    sim.run_until(sim.stable_leader, 5_000, "a first stable leader")
    return sim


def applied_everywhere(sim: Simulation, index: int, nodes=None):
    return lambda: all(len(n.state) > index for n in (nodes or sim.nodes.values()))


def test_a_single_node_elects_itself_and_commits_at_once():
    node = RaftNode(7, [7], MemoryRaftStorage(), random.Random(1), now_ms=0)
    assert node.tick(0) == [] and node.role == "leader" and node.leader_id == 7 and node.term == 1
    index, out = node.propose(b"hello", 0)
    assert out == [] and index == 1 and node.commit_index == 1
    assert node.take_committed() == [Entry(1, 0, b""), Entry(1, 1, b"hello")]
    assert node.take_committed() == []


def test_a_follower_refuses_proposals_naming_the_leader():
    sim = calm(3, 3)
    follower = next(n for n in sim.nodes.values() if n.raft.role == "follower")
    with pytest.raises(NotControllerError) as caught:
        follower.raft.propose(b"x", sim.now)
    assert caught.value.details["leader_id"] == follower.raft.leader_id is not None


def test_a_new_leader_after_a_crash_holds_every_committed_entry():
    sim = calm(1, 3)
    old = sim.stable_leader()
    old_term = old.raft.term
    last = max(sim.propose(old)[0] for _ in range(5))
    sim.run_until(applied_everywhere(sim, last), 1_000, "five entries applied everywhere")
    committed = list(sim.committed)

    sim.crash(old.id)
    new = sim.run_until(lambda: next(iter(sim.leader_nodes()), None), 2_000, "a new leader")
    assert new.id != old.id and new.raft.term > old_term
    held = new.storage.entries(0, len(committed))
    assert [(e.term, e.data) for e in held] == committed

    index, data = sim.propose(new)
    sim.restart(old.id)
    sim.run_until(applied_everywhere(sim, index), 2_000, "the restarted node to catch up")
    assert all(n.state[index] == (new.raft.term, data) for n in sim.nodes.values())


def test_a_partitioned_leader_steps_down_and_never_commits():
    sim = calm(2, 5)
    old = sim.stable_leader()
    old_term, cut_at = old.raft.term, sim.now
    sim.isolate(old.id)
    index, data = sim.propose(old)  # accepted into its own log only

    sim.run_until(lambda: old.raft.role != "leader", 400, "check-quorum to depose the cut-off leader")
    assert sim.now - cut_at <= sim.config.election_timeout_ms[0] + 20
    new = sim.run_until(lambda: next((n for n in sim.leader_nodes() if n.id != old.id), None), 2_000,
                        "the majority to elect a leader")
    assert new.raft.term > old_term and old.raft.commit_index < index

    sim.heal()
    sim.run_until(sim.stable_leader, 3_000, "the cluster to settle after healing")
    assert all(d != data for _, d in sim.committed)
    assert all(d != data for n in sim.nodes.values() for _, d in n.state)
    assert old.storage.term_at(index) != old_term, "the stale entry was not cut from the old leader's log"


class _NoPreVote(RaftNode):
    """Campaigns in a new term straight away, as Raft without pre-vote does."""

    def _start_pre_vote(self, now_ms):
        self._set_role(Role.PROSPECTIVE)
        return self._start_election(now_ms)


def _rejoin(node_class, cut: str) -> tuple[Simulation, int, int, int]:
    """A follower is cut off for ten election timeouts, then the cut heals. ``cut="isolated"``: it
    hears nobody (a partitioned node rejoining); ``cut="deaf"``: only the leader's messages to it
    are lost, so it can still ask everyone else for votes (a node that would not win)."""
    sim = calm(5, 3, node_class=node_class)
    leader = sim.stable_leader()
    term = leader.raft.term
    loner = next(n for n in sim.nodes.values() if n is not leader)
    if cut == "isolated":
        sim.isolate(loner.id)
    else:
        sim.cut_links.add((leader.id, loner.id))
    until = sim.now + 10 * sim.config.election_timeout_ms[1]
    sim.run_until(lambda: sim.now >= until, 10_000, "time to pass")
    loner_term = loner.raft.term
    sim.heal()
    until = sim.now + 2_000
    sim.run_until(lambda: sim.now >= until, 10_000, "time to pass")
    return sim, leader.id, term, loner_term


@pytest.mark.parametrize("cut", ["isolated", "deaf"])
def test_pre_vote_keeps_a_cut_off_node_from_disrupting_the_leader(cut):
    sim, leader_id, term, loner_term = _rejoin(RaftNode, cut)
    assert loner_term == term, "the cut-off node bumped its term"
    assert max(sim.leaders) == term and sim.nodes[leader_id].raft.role == "leader"
    assert {n.raft.term for n in sim.nodes.values()} == {term}


@pytest.mark.parametrize("cut", ["isolated", "deaf"])
def test_without_pre_vote_the_same_cut_deposes_the_leader(cut):
    """The scenarios above are sharp: without pre-vote the same runs bump terms and force an election."""
    sim, leader_id, term, loner_term = _rejoin(_NoPreVote, cut)
    assert loner_term > term and max(sim.leaders) > term


def test_a_follower_behind_the_compacted_log_gets_a_snapshot():
    sim = calm(4, 3)
    leader = sim.stable_leader()
    lagging = next(n for n in sim.nodes.values() if n is not leader)
    sim.crash(lagging.id)
    last = 0
    for _ in range(20):
        last = sim.propose(leader)[0]
        sim.step()
    others = [n for n in sim.nodes.values() if n is not lagging]
    sim.run_until(applied_everywhere(sim, last, others), 1_000, "the live nodes to apply")
    for node in others:
        sim.compact(node)
    assert leader.storage.first_index() > lagging.storage.last_index() + 1

    sim.restart(lagging.id)
    sim.run_until(applied_everywhere(sim, last), 2_000, "the lagging node to catch up")
    assert sim.stats.snapshots_installed == 1
    assert lagging.storage.snapshot()[0] >= last and lagging.state == leader.state


# ---------------------------------------------------------------------------------- by hand
class Wire:
    """Hand delivery for scenarios too precise for random faults: messages wait until allowed."""

    def __init__(self, nodes: dict[int, RaftNode]) -> None:
        self.nodes, self.queue, self.delivered = nodes, [], []

    def send(self, envelopes) -> None:
        self.queue.extend(envelopes)

    def run(self, now: int, allow=lambda env: True) -> None:
        while True:
            env = next((e for e in self.queue if allow(e)), None)
            if env is None:
                return
            self.queue.remove(env)
            self.delivered.append(env)
            if env.dst in self.nodes:
                self.send(self.nodes[env.dst].step(env.src, env.message, now))


def _node(node_id, voters, log, term, node_class=RaftNode, max_entries=256) -> RaftNode:
    storage = MemoryRaftStorage()
    storage.save_hard_state(term, None)
    storage.append([Entry(t, i, b"%d@%d" % (t, i)) for i, t in enumerate(log)])
    return node_class(node_id, voters, storage, random.Random(node_id), 0, election_timeout_ms=(150, 300),
                      heartbeat_ms=30, max_entries_per_append=max_entries)


class _CountsOldTerms(RaftNode):
    """Commits whatever a majority holds, whatever its term: the bug of the Raft paper's Figure 8."""

    def _advance_commit(self):
        index = quorum_index(self.last_index, [p.match_index for p in self._progress.values()])
        self._commit = max(self._commit, index)


def _figure_8(node_class):
    """Raft paper, Figure 8, 0-based. Node 1 led term 2 and wrote index 1 only to itself; node 5 led
    term 3 and wrote a different index 1 only to itself. Node 1 now wins term 4 and copies its
    term-2 entry to nodes 2 and 3 — a majority — but not yet its term-4 no-op."""
    voters = [1, 2, 3, 4, 5]
    logs = {1: [1, 2], 2: [1], 3: [1], 4: [1], 5: [1, 3]}
    nodes = {i: _node(i, voters, logs[i], 3, node_class if i == 1 else RaftNode, max_entries=1) for i in voters}
    wire = Wire(nodes)
    wire.send(nodes[1].tick(1_000))

    def first_term(env):  # nodes 1-3 talk; the no-op (index 2) reaches nobody who could store it
        m = env.message
        if {env.src, env.dst} - {1, 2, 3}:
            return False
        return not (isinstance(m, AppendRequest) and m.entries and m.entries[-1].index >= 2
                    and nodes[env.dst].last_index >= 1)

    wire.run(1_000, first_term)
    assert nodes[1].role == "leader" and nodes[1].term == 4
    held = [i for i in voters if nodes[i].storage.term_at(1) == 2]
    assert held == [1, 2, 3]  # a majority holds the term-2 entry
    committed_by_1 = nodes[1].commit_index

    # Node 1 crashes; node 5 (last term 3 beats last term 2) wins with nodes 2, 3 and 4.
    del nodes[1]
    wire.queue.clear()
    for now in (2_000, 3_000):
        wire.send(nodes[5].tick(now))
        wire.run(now)
    assert nodes[5].role == "leader"
    return committed_by_1, [nodes[i].storage.term_at(1) for i in (2, 3, 4, 5)]


def test_figure_8_an_old_term_entry_commits_only_under_one_of_the_current_term():
    committed_by_old_leader, terms_at_1 = _figure_8(RaftNode)
    assert committed_by_old_leader < 1, "the term-2 entry was committed by counting replicas"
    assert terms_at_1 == [3, 3, 3, 3]  # replaced by node 5's entry, harmlessly: it never committed


def test_figure_8_without_the_rule_loses_a_committed_entry():
    """The scenario above is sharp: counting replicas of an old-term entry commits index 1, which
    the next leader then overwrites."""
    committed_by_old_leader, terms_at_1 = _figure_8(_CountsOldTerms)
    assert committed_by_old_leader == 1 and terms_at_1 == [3, 3, 3, 3]


def test_a_divergent_tail_is_skipped_a_term_at_a_time():
    """The follower holds 50 entries of a term the leader never saw: one rejection (naming where
    that term starts) is enough, not one per entry."""
    leader = _node(1, [1, 2], [1] * 5 + [3] * 10, 3)
    follower = _node(2, [1, 2], [1] * 5 + [2] * 50, 2)
    wire = Wire({1: leader, 2: follower})
    wire.send(leader.tick(1_000))
    wire.run(1_000)
    rejections = [e.message for e in wire.delivered
                  if isinstance(e.message, AppendResponse) and not e.message.success]
    assert leader.role == "leader"
    assert [r.conflict_index for r in rejections] == [5]
    assert follower.storage.entries(0, 100) == leader.storage.entries(0, 100)
    assert leader.commit_index == 15  # its no-op, acknowledged by the follower


def test_stale_terms_are_answered_so_a_deposed_leader_steps_down():
    voters = [1, 2, 3]
    nodes = {i: _node(i, voters, [1], 1) for i in voters}
    wire = Wire(nodes)
    wire.send(nodes[1].tick(1_000))
    wire.run(1_000)
    assert nodes[1].role == "leader" and nodes[1].term == 2
    # Nodes 2 and 3 move on to term 3 without node 1.
    wire.send(nodes[2].tick(2_000))
    wire.run(2_000, lambda e: 1 not in (e.src, e.dst))
    assert nodes[2].role == "leader" and nodes[2].term == 3 and nodes[1].role == "leader"

    _, out = nodes[1].propose(b"stale", 2_000)
    to_2 = next(e for e in out if e.dst == 2)
    reply = nodes[2].step(1, to_2.message, 2_000)
    assert [type(e.message) for e in reply] == [AppendResponse] and reply[0].message.term == 3
    nodes[1].step(2, reply[0].message, 2_000)
    assert nodes[1].role == "follower" and nodes[1].term == 3

    old_vote = nodes[3].step(1, VoteRequest(2, 1, 5, 2), 2_000)
    assert old_vote[0].message == VoteResponse(3, 3, False, False)
    assert nodes[3].voted_for == 2
