"""Broker core benchmark: one producer process, one broker process, 100-byte values.

Prints one JSON line per figure. Baselines are measured in the same run on the same machine:
page-cache sequential write MB/s and loopback TCP MB/s. Nothing here is asserted; BENCHMARKS.md
records the figures.

    python bench/broker_bench.py [--records 1000000] [--quick]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

VALUE = b"x" * 100


def emit(name, value, unit, **extra):
    print(json.dumps({"figure": name, "value": round(value, 3), "unit": unit, **extra}), flush=True)


# ------------------------------------------------------------------------------ baselines
def page_cache_write_mb_s(directory: str, total_mb: int = 1024) -> float:
    chunk = os.urandom(1 << 20)
    path = os.path.join(directory, "baseline.bin")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    start = time.perf_counter()
    for _ in range(total_mb):
        os.write(fd, chunk)
    elapsed = time.perf_counter() - start
    os.close(fd)
    os.unlink(path)
    return total_mb / elapsed


def _sink(port_queue):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port_queue.put(server.getsockname()[1])
    conn, _ = server.accept()
    buf = bytearray(1 << 20)
    while conn.recv_into(buf):
        pass


def loopback_mb_s(total_mb: int = 2048) -> float:
    q = mp.Queue()
    proc = mp.Process(target=_sink, args=(q,), daemon=True)
    proc.start()
    sock = socket.create_connection(("127.0.0.1", q.get(timeout=10)))
    chunk = os.urandom(1 << 20)
    start = time.perf_counter()
    for _ in range(total_mb):
        sock.sendall(chunk)
    sock.close()
    proc.join(30)
    return total_mb / (time.perf_counter() - start)


# ------------------------------------------------------------------------------ broker
def start_broker(data_dir: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "broker", "broker", "start", "--data-dir", data_dir,
                             "--port", "0", "--log-level", "WARNING"], cwd=ROOT, stdout=subprocess.PIPE,
                            text=True)
    line = proc.stdout.readline()
    if "listening on" not in line:
        raise RuntimeError(f"broker did not start: {line}")
    return proc, line.strip().rsplit(" ", 1)[1]


def create_topic(servers: str, name: str, partitions: int = 1, **configs) -> None:
    from broker.client import AdminClient, NewTopic
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.create_topics([NewTopic(name, partitions, config=configs)])[name].result()


def produce_waiting(p, produce, topic: str, value: bytes) -> None:
    """``produce``, serving delivery reports while the producer's queue is full
    (queue.buffering.max.messages / buffer.memory), as a confluent-kafka application does."""
    while True:
        try:
            return produce(topic, value)
        except BufferError:
            p.poll(0.01)


def bench_per_record_produce(servers: str, n: int, topic: str = "per-record", acks: str = "1",
                             create: bool = True) -> float:
    from broker.client import Producer
    if create:
        create_topic(servers, topic)
    p = Producer({"bootstrap.servers": servers, "acks": acks, "linger.ms": 5})
    produce = p.produce
    start = time.perf_counter()
    for _ in range(n):
        produce_waiting(p, produce, topic, VALUE)
    p.flush(120)
    elapsed = time.perf_counter() - start
    p.close()
    return n / elapsed


def bench_bulk_produce(servers: str, n: int, topic: str = "bulk", value_size: int = 100, acks: str = "1",
                       create: bool = True) -> tuple[float, float]:
    import pyarrow as pa
    from broker.client import Producer
    if create:
        create_topic(servers, topic)
    piece = min(n, 100_000)
    table = pa.table({"value": pa.array([b"x" * value_size] * piece)})
    p = Producer({"bootstrap.servers": servers, "acks": acks, "linger.ms": 5})
    start = time.perf_counter()
    for _ in range(n // piece):
        p.produce_batch(topic, table)
    p.flush(300)
    elapsed = time.perf_counter() - start
    p.close()
    records = (n // piece) * piece
    return records / elapsed, records * value_size / elapsed / 1e6


def bench_consume(servers: str, topic: str, n: int, bulk: bool) -> float:
    from broker.client import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": servers})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = 0
    start = time.perf_counter()
    if bulk:
        while got < n:
            t = c.poll_batch(10)
            if t is None:
                break
            got += t.num_rows
    else:
        poll = c.poll
        while got < n:
            if poll(10) is None:
                break
            got += 1
    elapsed = time.perf_counter() - start
    c.close()
    return got / elapsed


def _latency_consumer(servers, topic, count, ready, results):
    from broker.client import OFFSET_END, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": servers, "fetch.max.wait.ms": 100})
    c.assign([TopicPartition(topic, 0, OFFSET_END)])
    c.poll(0.5)
    ready.set()
    lat = []
    while len(lat) < count:
        msg = c.poll(10)
        if msg is None:
            break
        lat.append((time.time_ns() - int(msg.value()[:19])) / 1e6)
    c.close()
    results.put(lat)


def bench_latency(servers: str, rate: int, seconds: float) -> tuple[float, float]:
    from broker.client import Producer
    create_topic(servers, "latency")
    count = int(rate * seconds)
    ready, results = mp.Event(), mp.Queue()
    consumer = mp.Process(target=_latency_consumer, args=(servers, "latency", count, ready, results))
    consumer.start()
    ready.wait(30)
    p = Producer({"bootstrap.servers": servers, "acks": "1", "linger.ms": 0})
    interval = 1.0 / rate
    start = time.perf_counter()
    for i in range(count):
        delay = start + i * interval - time.perf_counter()
        if delay > 0:
            time.sleep(delay)  # sleeping releases the GIL; a busy-wait would starve the sender thread
        p.produce("latency", b"%019d" % time.time_ns() + VALUE[:81])
        if i % 100 == 0:
            p.poll(0)
    p.flush(30)
    lat = sorted(results.get(timeout=60))
    consumer.join(10)
    p.close()
    return lat[len(lat) // 2], lat[int(len(lat) * 0.99)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="smaller runs, for a smoke check")
    args = parser.parse_args()
    n = 200_000 if args.quick else args.records
    machine = {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}
    emit("machine", os.cpu_count(), "cpus", **machine)
    with tempfile.TemporaryDirectory(prefix="riverlog-bench-") as tmp:
        disk = page_cache_write_mb_s(tmp, 256 if args.quick else 1024)
        emit("baseline.page_cache_write", disk, "MB/s")
        net = loopback_mb_s(512 if args.quick else 2048)
        emit("baseline.loopback_tcp", net, "MB/s")
        proc, servers = start_broker(os.path.join(tmp, "data"))
        try:
            rate = bench_per_record_produce(servers, n)
            emit("produce.per_record", rate, "rec/s", target=400_000, ratio_to_target=rate / 400_000)
            rate, mb = bench_bulk_produce(servers, n * 5)
            emit("produce.bulk", rate, "rec/s", mb_s=round(mb, 1), target=1_500_000,
                 ratio_to_target=rate / 1_500_000)
            rate = bench_consume(servers, "bulk", n, bulk=False)
            emit("consume.per_record", rate, "rec/s")
            rate = bench_consume(servers, "bulk", n * 5, bulk=True)
            emit("consume.bulk", rate, "rec/s", target=2_000_000, ratio_to_target=rate / 2_000_000)
            p50, p99 = bench_latency(servers, 10_000, 2 if args.quick else 5)
            emit("latency.end_to_end_p50", p50, "ms", rate="10000 rec/s", target=2.0)
            emit("latency.end_to_end_p99", p99, "ms", rate="10000 rec/s", target=5.0)
            _, mb = bench_bulk_produce(servers, 20_000 if args.quick else 100_000, "large", value_size=10_000)
            emit("produce.large_batch_write", mb, "MB/s", baseline=round(disk, 1), ratio=round(mb / disk, 3),
                 target_ratio=0.5)
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
