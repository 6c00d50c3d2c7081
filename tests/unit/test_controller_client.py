"""A broker-only node's view of the controller quorum, heard with its metadata fetches: the newest
term wins (Raft's rule), and a leaderless answer in the same term does not erase a known leader."""
from broker.server.controller_client import ControllerClient
from broker.server.peers import Peers


def _client() -> ControllerClient:
    return ControllerClient(4, {1: ("127.0.0.1", 1), 2: ("127.0.0.1", 2), 3: ("127.0.0.1", 3)}, None, Peers(4))


def test_a_newer_term_moves_the_view_and_an_older_one_does_not():
    c = _client()
    leading_1 = c._leading(1)
    assert leading_1()                      # nothing heard yet: the node asked may lead
    c.observe(3, 1)
    assert leading_1() and c._candidates()[0] == 1
    c.observe(4, 2)
    assert not leading_1() and c._leading(2)() and c._candidates()[0] == 2
    c.observe(3, 1)                         # a stale controller's answer, served late
    assert not leading_1() and c._candidates()[0] == 2


def test_an_election_in_progress_leaves_every_node_possible_until_a_leader_is_known():
    c = _client()
    c.observe(5, 1)
    c.observe(6, None)                      # a new term, no leader yet
    assert c._leading(1)() and c._leading(3)()
    c.observe(6, 3)
    assert not c._leading(1)() and c._leading(3)()
    c.observe(6, None)                      # a controller of the same term that has not heard yet
    assert not c._leading(1)() and c._leading(3)()
