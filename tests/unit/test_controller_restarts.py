"""A broker that restarts (registers a new incarnation) and the controller's answers to it:
leader epochs across the restart, and the heartbeat replies of a broker shutting down."""
from __future__ import annotations

import pytest

from tests.unit.test_quorum_controller import Harness

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("failover", [False, True], ids=["same-controller", "after-failover"])
@pytest.mark.parametrize("rf", [1, 3])
def test_a_restarted_leader_leads_again_only_under_a_new_leader_epoch(rf, failover):
    """Kafka moves leadership off a re-registering broker in its registration's records
    (``handleBrokerUncleanShutdown``, or the session expiry that must come first): the new
    process may have lost its unflushed tail, so it must not lead again under the old epoch,
    even when its unfencing heartbeat reaches the controller before any upkeep runs."""
    h = Harness()
    h.create("t", partitions=1, rf=rf)
    if failover:
        h.c.activate(h.image, h.now)   # a new active controller: it has heard from no broker yet
    owner = h.partitions("t")[0].leader
    before = h.partitions("t")[0].leader_epoch
    h.register(owner)      # a new incarnation: the process restarted
    h.heartbeat(owner)     # caught up with its registration: unfenced at once
    h.tick(0)
    p = h.partitions("t")[0]
    assert not h.image.brokers[owner].fenced
    if p.leader == owner:
        assert p.leader_epoch > before, f"{owner} leads again under its pre-restart epoch {before}"
    else:
        assert p.leader != -1 and p.leader_epoch > before


def test_a_fenced_broker_asking_to_shut_down_is_not_told_it_is_unfenced():
    """Kafka's ``calculateNextBrokerState``: a FENCED broker that wants to shut down is answered
    fenced (and may shut down); it is never told it is unfenced, which would let it serve."""
    h = Harness()
    h.register(2)   # restarted: fenced until caught up
    assert h.image.brokers[2].fenced
    records, reply = h.c.heartbeat(h.image, 2, h.epochs[2], h.image.offset, True, h.now)
    h.commit(records)
    assert reply.fenced
    reply = h.heartbeat(2, shut_down=True)
    assert reply.fenced and reply.should_shut_down
