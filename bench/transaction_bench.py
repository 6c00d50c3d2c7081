"""Transactional throughput: a commit every 100 ms against the same producer without transactions
(idempotent, acks=all), one broker, same records, same run. Prints one JSON line per figure.

    python bench/transaction_bench.py [--records 1000000] [--commit-ms 100] [--rounds 2]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from broker_bench import VALUE, create_topic, emit, produce_waiting, start_broker  # noqa: E402 - beside this file


def idempotent_rate(servers: str, topic: str, n: int) -> float:
    from broker.client import Producer
    p = Producer({"bootstrap.servers": servers, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    start = time.perf_counter()
    for i in range(n):
        produce_waiting(p, p.produce, topic, VALUE)
        if i % 1_000 == 0:
            p.poll(0)
    p.flush(120)
    elapsed = time.perf_counter() - start
    p.close()
    return n / elapsed


def transactional_rate(servers: str, topic: str, n: int, commit_ms: int) -> tuple[float, int]:
    from broker.client import Producer
    p = Producer({"bootstrap.servers": servers, "transactional.id": "bench", "linger.ms": 5})
    p.init_transactions(30)
    commits = 0
    start = time.perf_counter()
    p.begin_transaction()
    opened = time.perf_counter()
    for i in range(n):
        produce_waiting(p, p.produce, topic, VALUE)
        if i % 1_000 == 0:
            p.poll(0)
            if (time.perf_counter() - opened) * 1000 >= commit_ms:
                p.commit_transaction(60)
                commits += 1
                p.begin_transaction()
                opened = time.perf_counter()
    p.commit_transaction(60)
    commits += 1
    elapsed = time.perf_counter() - start
    p.close()
    return n / elapsed, commits


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--commit-ms", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="riverlog-txn-bench-") as tmp:
        proc, servers = start_broker(tmp)
        try:
            create_topic(servers, "idempotent", 3)
            create_topic(servers, "transactional", 3)
            # Alternate the two, twice, so warm-up and drift fall on both alike.
            bases, rates, commits = [], [], 0
            for _ in range(args.rounds):
                bases.append(idempotent_rate(servers, "idempotent", args.records))
                rate, n = transactional_rate(servers, "transactional", args.records, args.commit_ms)
                rates.append(rate)
                commits += n
            base, rate = sum(bases) / len(bases), sum(rates) / len(rates)
            emit("baseline.idempotent_acks_all", base, "rec/s", rounds=[round(b) for b in bases])
            emit("transactional.commit_every_100ms" if args.commit_ms == 100 else "transactional", rate, "rec/s",
                 baseline=round(base), ratio=round(rate / base, 3), target_ratio=0.8, commits=commits,
                 commit_ms=args.commit_ms, rounds=[round(r) for r in rates])
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
