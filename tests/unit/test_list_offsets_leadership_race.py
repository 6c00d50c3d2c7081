"""ListOffsets answers from one leader state: a leadership lost right after the handler's leader
check is answered NOT_LEADER_OR_FOLLOWER (Kafka reads the offsets under the leader's lock in
``Partition.fetchOffsetForTimestamp``), never with this replica's follower high watermark, which
may be below the end offset it answered as leader, under the new leader's epoch."""
from __future__ import annotations

import pytest

from broker.clock import ManualClock
from broker.config import TOPIC_CONFIG
from broker.errors import NotLeaderOrFollowerError
from broker.partition import AppendNotifier, Partition
from broker.proto import riverlog_pb2 as pb
from broker.records import arrow_body
from broker.server.handlers import EARLIEST, LATEST, MAX_TIMESTAMP, Handlers
from broker.storage.log import Log
from tests.unit.test_acks_all_leadership_races import OneBroker

pytestmark = pytest.mark.unit


class LosingLeadership(Partition):
    """Broker 1 stops leading (broker 2 leads epoch 6) just after a leader check passed."""

    lose = False

    def check_leader(self, leader_epoch: int = -1) -> None:
        super().check_leader(leader_epoch)
        if self.lose:
            self.lose = False
            self.make_follower(2, 6, 2, [1, 2], [2])


def leader(tmp_path) -> LosingLeadership:
    clock = ManualClock()
    p = LosingLeadership("t", 0, "id", Log.open(str(tmp_path), TOPIC_CONFIG.parse({}), clock), AppendNotifier(),
                         node_id=1, clock=clock)
    p.make_leader(5, 1, [1], [1])
    p.append_records(arrow_body.encode_batch(arrow_body.record_batch([None] * 3, [b"a", b"b", b"c"], [1, 2, 3])))
    return p


def ask(handlers: Handlers, spec: int) -> pb.ListOffsetsResponse:
    request = pb.ListOffsetsRequest()
    request.topics.add(name="t").partitions.add(partition=0, timestamp=spec)
    return handlers.list_offsets(request).topics[0].partitions[0]


@pytest.mark.parametrize("spec", [LATEST, EARLIEST, MAX_TIMESTAMP])
def test_a_leadership_lost_after_the_leader_check_is_answered_not_leader(tmp_path, spec):
    p = leader(tmp_path)
    handlers = Handlers(OneBroker(p), "127.0.0.1", 0)
    assert (ask(handlers, LATEST).offset, ask(handlers, LATEST).leader_epoch) == (3, 5)
    p.lose = True
    answer = ask(handlers, spec)
    assert answer.error_code == NotLeaderOrFollowerError.code
    assert (answer.offset, answer.leader_epoch) == (-1, -1)
