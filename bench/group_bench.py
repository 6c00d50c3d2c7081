"""Consumer-group rebalance benchmark: a member joins a busy group; how long until every partition
is being consumed again by its new owner? Eager (range) against cooperative (cooperative-sticky).

One broker process, a topic of 12 partitions fed continuously, three members consuming; then a
fourth joins. The figure is the time from the join to the moment every partition has delivered
a record to the member that owns it once the group is stable again (p50 over rounds). With
cooperative-sticky most partitions never stop, so only the moved ones count; with an eager
assignor every partition stops and restarts. Members heartbeat every ``--heartbeat-ms`` when
nothing moves, which bounds how soon they hear of the join. Prints one JSON line per figure.

    python bench/group_bench.py [--rounds 5] [--heartbeat-ms 500]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from broker_bench import create_topic, emit, start_broker  # noqa: E402 - beside this file

PARTITIONS = 12


class Feeder(threading.Thread):
    """Produces to every partition in turn, ~2,000 records/s, until stopped."""

    def __init__(self, servers: str, topic: str):
        super().__init__(daemon=True)
        from broker.client import Producer
        self.producer = Producer({"bootstrap.servers": servers, "linger.ms": 1})
        self.topic, self.stop_event = topic, threading.Event()

    def run(self):
        i = 0
        while not self.stop_event.is_set():
            for p in range(PARTITIONS):
                self.producer.produce(self.topic, value=b"x" * 100, partition=p)
            i += 1
            self.producer.poll(0)
            time.sleep(0.005)
        self.producer.flush(10)


class Member(threading.Thread):
    def __init__(self, servers: str, group: str, topic: str, strategy: str, heartbeat_ms: int):
        super().__init__(daemon=True)
        from broker.client import Consumer
        self.consumer = Consumer({"bootstrap.servers": servers, "group.id": group, "auto.offset.reset": "latest",
                                  "partition.assignment.strategy": strategy, "heartbeat.interval.ms": heartbeat_ms,
                                  "enable.auto.commit": False})
        self.topic, self.stop_event = topic, threading.Event()
        self.last_seen: dict[int, float] = {}  # partition -> when this member last got one of its records
        self.first_after: dict[int, float] = {}
        self.mark = float("inf")
        self.moved = 0  # partitions (re)assigned to this member after the join

    def run(self):
        self.consumer.subscribe([self.topic], on_assign=self._assigned)
        while not self.stop_event.is_set():
            for m in self.consumer.consume(1000, 0.02):
                if m.error() is None:
                    now = time.monotonic()
                    self.last_seen[m.partition()] = now
                    if now > self.mark and m.partition() not in self.first_after:
                        self.first_after[m.partition()] = now
        self.consumer.close()

    def _assigned(self, consumer, partitions):
        for tp in partitions:  # a (re)assigned partition counts from its first record under the new owner
            self.first_after.pop(tp.partition, None)
        if time.monotonic() > self.mark:
            self.moved += len(partitions)

    @property
    def owned(self) -> set[int]:
        return {tp.partition for tp in self.consumer.assignment()}


def one_round(servers: str, topic: str, strategy: str, heartbeat_ms: int, group: str) -> tuple[float, int]:
    members = [Member(servers, group, topic, strategy, heartbeat_ms) for _ in range(3)]
    for m in members:
        m.start()
    _wait(lambda: sorted(len(m.owned) for m in members) == [4, 4, 4] and all(len(m.last_seen) == 4 for m in members),
          60, "three members with four partitions each")
    time.sleep(1.0)  # settle: everything is flowing
    joined = time.monotonic()
    for m in members:
        m.mark = joined
    newcomer = Member(servers, group, topic, strategy, heartbeat_ms)
    newcomer.mark = joined
    newcomer.start()
    everyone = members + [newcomer]
    _wait(lambda: sorted(len(m.owned) for m in everyone) == [3, 3, 3, 3]
          and all(set(m.first_after) >= m.owned for m in everyone), 60, "every partition consumed by its new owner")
    # For a member that kept a partition through a cooperative rebalance, its first record after the
    # join counts; for the rest, the first record after they got the partition.
    finished = max(m.first_after[p] for m in everyone for p in m.owned)
    for m in everyone:
        m.stop_event.set()
    for m in everyone:
        m.join(10)
    return finished - joined, sum(m.moved for m in everyone)


def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.005)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--heartbeat-ms", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="riverlog-group-bench-") as tmp:
        proc, servers = start_broker(tmp)
        try:
            create_topic(servers, "feed", PARTITIONS)
            feeder = Feeder(servers, "feed")
            feeder.start()
            for strategy, kind in (("range", "eager"), ("cooperative-sticky", "cooperative")):
                rounds = [one_round(servers, "feed", strategy, args.heartbeat_ms, f"{kind}-{i}")
                          for i in range(args.rounds)]
                times = [t for t, _ in rounds]
                emit(f"groups.join_to_all_partitions_consumed_p50.{kind}", statistics.median(times), "s",
                     assignor=strategy, heartbeat_interval_ms=args.heartbeat_ms,
                     all=[round(t, 3) for t in times],
                     partitions_stopped_of=PARTITIONS, partitions_stopped=statistics.median(m for _, m in rounds))
            feeder.stop_event.set()
            feeder.join(10)
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
