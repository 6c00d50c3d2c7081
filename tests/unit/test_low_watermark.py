"""The leader's low watermark (Kafka's ``Partition.lowWatermarkIfLeader``): the smallest log start
offset over the leader and every follower on an alive broker, as the followers' fetches report it.
DeleteRecords is acknowledged only once it reached the offset (``DelayedDeleteRecords``)."""
from __future__ import annotations

from broker.replication.leader_state import LeaderState


def leader(isr=(1, 2, 3)) -> LeaderState:
    return LeaderState(1, replicas=[1, 2, 3], isr=list(isr), leader_epoch=4,
                       log_end_offset=100, high_watermark=100, now_ms=0)


def everyone(_node: int) -> bool:
    return True


def test_a_follower_that_has_not_fetched_this_epoch_holds_the_low_watermark_at_unknown():
    s = leader()
    assert s.low_watermark(60, everyone) == -1
    s.on_follower_fetch(2, 100, now_ms=1, log_start_offset=60)
    assert s.low_watermark(60, everyone) == -1      # 3 may still hold everything
    s.on_follower_fetch(3, 100, now_ms=1, log_start_offset=0)
    assert s.low_watermark(60, everyone) == 0
    s.on_follower_fetch(3, 100, now_ms=2, log_start_offset=60)
    assert s.low_watermark(60, everyone) == 60
    assert s.follower_state(3).log_start_offset == 60


def test_the_low_watermark_is_the_smallest_log_start_and_never_above_the_leaders():
    s = leader()
    s.on_follower_fetch(2, 100, now_ms=1, log_start_offset=70)
    s.on_follower_fetch(3, 100, now_ms=1, log_start_offset=65)
    assert s.low_watermark(60, everyone) == 60
    assert s.low_watermark(80, everyone) == 65


def test_followers_out_of_the_isr_count_but_brokers_not_alive_do_not():
    s = leader(isr=(1, 2))                           # 3 is out of the ISR yet still a replica
    s.on_follower_fetch(2, 100, now_ms=1, log_start_offset=60)
    s.on_follower_fetch(3, 40, now_ms=1, log_start_offset=10)
    assert s.low_watermark(60, everyone) == 10
    assert s.low_watermark(60, lambda node: node != 3) == 60   # fenced or unregistered: skipped
    assert s.low_watermark(60, lambda node: False) == 60       # the leader's own start always counts


def test_a_fetch_without_a_log_start_makes_it_unknown_again():
    s = leader()
    s.on_follower_fetch(2, 100, now_ms=1, log_start_offset=60)
    s.on_follower_fetch(3, 100, now_ms=1, log_start_offset=60)
    assert s.low_watermark(60, everyone) == 60
    s.on_follower_fetch(3, 100, now_ms=2)            # as Kafka: the fetch's value replaces the last one
    assert s.low_watermark(60, everyone) == -1
