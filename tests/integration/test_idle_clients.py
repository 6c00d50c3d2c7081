"""The number of connected clients must not bound the broker's availability.

Each Producer keeps a ProduceStream open per broker, and a consumer at the log end parks a fetch
for fetch.max.wait.ms: neither may hold a request thread while idle (rpc.py), so hundreds of them
leave the broker as responsive as before.
"""
from __future__ import annotations

import subprocess
import sys
import time

import grpc
import pytest

from broker.client import AdminClient, NewTopic, Producer
from broker.proto import riverlog_pb2 as pb
from broker.proto import riverlog_pb2_grpc as pb_grpc
from tests.conftest import ROOT, wait_until

pytestmark = [pytest.mark.integration]

IDLE_PRODUCERS = 500   # in two child processes, so this process's threads stay few
PARKED_FETCHES = 500

# Each child opens its share of producers, sends one record with each (which opens the
# producer's ProduceStream to the broker), prints "ready" and then idles until stdin closes.
_IDLE_PRODUCERS = """
import sys
from broker.client import Producer
servers, topic, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
producers = [Producer({"bootstrap.servers": servers, "linger.ms": 0}) for _ in range(count)]
for p in producers:
    p.produce(topic, b"hello")
for p in producers:
    assert p.flush(60) == 0, "a record of an idle producer was not delivered"
print("ready", flush=True)
sys.stdin.read()
"""


def _parked_fetch(topic: str, offset: int, wait_ms: int) -> pb.FetchRequest:
    return pb.FetchRequest(replica_id=-1, max_wait_ms=wait_ms, min_bytes=1, topics=[pb.FetchTopic(
        name=topic, partitions=[pb.FetchPartition(partition=0, fetch_offset=offset)])])


@pytest.mark.slow
def test_idle_producers_and_parked_fetches_leave_the_broker_answering(broker_factory):
    b = broker_factory()
    with AdminClient({"bootstrap.servers": b.bootstrap}) as admin:
        admin.create_topics([NewTopic("idle", 1)])["idle"].result(30)
    children = [subprocess.Popen([sys.executable, "-c", _IDLE_PRODUCERS, b.bootstrap, "idle",
                                  str(IDLE_PRODUCERS // 2)], cwd=ROOT, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True) for _ in range(2)]
    channel = grpc.insecure_channel(b.bootstrap)
    try:
        for child in children:
            assert child.stdout.readline().strip() == "ready", "idle producers could not all deliver"
        stub = pb_grpc.RiverlogStub(channel)
        parked = [stub.Fetch.future(_parked_fetch("idle", IDLE_PRODUCERS, 60_000), timeout=120)
                  for _ in range(PARKED_FETCHES)]

        # A fresh client is answered while all of them are connected and waiting.
        with AdminClient({"bootstrap.servers": b.bootstrap, "request.timeout.ms": 5000}) as admin:
            assert "idle" in admin.list_topics(timeout=5).topics
        fresh = Producer({"bootstrap.servers": b.bootstrap, "delivery.timeout.ms": 5000})
        delivered = []
        fresh.produce("idle", b"wake up", on_delivery=lambda err, msg: delivered.append(err))
        assert fresh.flush(10) == 0 and delivered == [None]

        # The new record answers every parked fetch: they were all waiting at once.
        for future in parked:
            response = future.result(timeout=30)
            part = response.topics[0].partitions[0]
            assert part.error_code == 0 and len(part.records) > 0
            assert part.high_watermark == IDLE_PRODUCERS + 1
    finally:
        for child in children:
            child.stdin.close()
            child.wait(30)
        channel.close()


def test_a_fetch_waits_no_longer_than_the_broker_allows(broker_factory):
    b = broker_factory(configs={"fetch.max.wait.ms": 300})
    with AdminClient({"bootstrap.servers": b.bootstrap}) as admin:
        admin.create_topics([NewTopic("capped", 1)])["capped"].result(30)
    with grpc.insecure_channel(b.bootstrap) as channel:
        stub = pb_grpc.RiverlogStub(channel)
        # Asks to wait a day: the broker answers (empty) at its own limit instead of parking it.
        started = time.monotonic()
        response = stub.Fetch(_parked_fetch("capped", 0, 86_400_000), timeout=20)
        waited = time.monotonic() - started
        part = response.topics[0].partitions[0]
        assert part.error_code == 0 and len(part.records) == 0 and part.high_watermark == 0
        # It did wait for data (fetch.max.wait.ms = 300), and not much longer than that.
        assert 0.25 <= waited < 10, waited
