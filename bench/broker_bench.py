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
def page_cache_write_mb_s(directory: str, total_mb: int = 1024, repeats: int = 1, runs: list | None = None,
                          cpu_runs: list | None = None) -> float:
    """Sequential 1 MiB writes into the page cache, the best of ``repeats`` runs: one run swings
    tenfold with the machine's load (the writer waits for a core), the best of several less.
    ``cpu_runs`` gets MiB per CPU-second of each run, which the load does not move."""
    chunk = os.urandom(1 << 20)
    path = os.path.join(directory, "baseline.bin")
    best = 0.0
    for _ in range(repeats):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(total_mb):
            os.write(fd, chunk)
        elapsed = time.perf_counter() - start
        if cpu_runs is not None:
            cpu_runs.append(total_mb / max(1e-9, time.process_time() - cpu))
        os.close(fd)
        os.unlink(path)
        best = max(best, total_mb / elapsed)
        if runs is not None:
            runs.append(total_mb / elapsed)
    return best


def disk_write_mb_s(directory: str, total_mb: int = 256) -> tuple[float, str]:
    """What ``dd bs=1M oflag=direct`` measures: 1 MiB writes that bypass the page cache (O_DIRECT,
    from a page-aligned buffer), or, where the file system refuses O_DIRECT, writes then fsync."""
    import mmap
    buf = mmap.mmap(-1, 1 << 20)
    buf.write(os.urandom(1 << 20))
    path = os.path.join(directory, "baseline-direct.bin")
    try:
        fd, how = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644), "O_DIRECT"
    except (OSError, AttributeError):
        fd, how = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), "fsync"
    try:
        start = time.perf_counter()
        for _ in range(total_mb):
            os.write(fd, buf)
        os.fsync(fd)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        os.unlink(path)
    return total_mb / elapsed, how


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
                       create: bool = True, cpu: list | None = None) -> tuple[float, float]:
    """(records/s, MB/s of values); ``cpu`` gets this process's CPU seconds of the timed part."""
    import pyarrow as pa
    from broker.client import Producer
    if create:
        create_topic(servers, topic)
    piece = min(n, 100_000)
    table = pa.table({"value": pa.array([b"x" * value_size] * piece)})
    p = Producer({"bootstrap.servers": servers, "acks": acks, "linger.ms": 5})
    start, started_cpu = time.perf_counter(), time.process_time()
    for _ in range(n // piece):
        p.produce_batch(topic, table)
    p.flush(300)
    elapsed = time.perf_counter() - start
    if cpu is not None:
        cpu.append(time.process_time() - started_cpu)
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


def bench_latency(servers: str, rate: int, seconds: float, topic: str = "latency",
                  cpu: dict | None = None) -> tuple[float, float]:
    """(p50, p99) in ms; ``cpu`` maps process names to pids and gets back each one's CPU seconds
    per second of the produce loop (``"producer"``: this process)."""
    from broker.client import Producer
    create_topic(servers, topic)
    count = int(rate * seconds)
    spawn = mp.get_context("spawn")  # a fork after this process used gRPC can hang the child's channels
    ready, results = spawn.Event(), spawn.Queue()
    consumer = spawn.Process(target=_latency_consumer, args=(servers, topic, count, ready, results))
    consumer.start()
    ready.wait(60)
    p = Producer({"bootstrap.servers": servers, "acks": "1", "linger.ms": 0})
    interval = 1.0 / rate
    pids = dict(cpu or {}, consumer=consumer.pid)
    started = {name: process_cpu_s(pid) for name, pid in pids.items()}
    started_here = time.process_time()
    start = time.perf_counter()
    for i in range(count):
        delay = start + i * interval - time.perf_counter()
        if delay > 0:
            time.sleep(delay)  # sleeping releases the GIL; a busy-wait would starve the sender thread
        p.produce(topic, b"%019d" % time.time_ns() + VALUE[:81])
        if i % 100 == 0:
            p.poll(0)
    p.flush(30)
    if cpu is not None:
        elapsed = time.perf_counter() - start
        cpu.update({name: (process_cpu_s(pid) - started[name]) / elapsed for name, pid in pids.items()})
        cpu["producer"] = (time.process_time() - started_here) / elapsed
    lat = sorted(results.get(timeout=60))
    consumer.join(10)
    p.close()
    return lat[len(lat) // 2], lat[int(len(lat) * 0.99)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="smaller runs, for a smoke check")
    parser.add_argument("--large-batch-rounds", type=int, default=0, metavar="N",
                        help="only the large-batch write against its baselines, alternating N rounds")
    parser.add_argument("--per-record-only", action="store_true",
                        help="only the per-record produce() figure, with the load average")
    parser.add_argument("--latency-rounds", type=int, default=0, metavar="N",
                        help="only the end-to-end latency, N rounds against one broker, with the load average")
    parser.add_argument("--rate", type=int, default=10_000, help="records per second of --latency-rounds")
    args = parser.parse_args()
    if args.latency_rounds:
        return latency_rounds(args.latency_rounds, args.rate, 2 if args.quick else 5)
    if args.large_batch_rounds:
        return large_batch_rounds(args.large_batch_rounds, 20_000 if args.quick else 100_000)
    n = 200_000 if args.quick else args.records
    if args.per_record_only:
        return per_record_only(n)
    machine = {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}
    emit("machine", os.cpu_count(), "cpus", **machine)
    with tempfile.TemporaryDirectory(prefix="riverlog-bench-") as tmp:
        disk = page_cache_write_mb_s(tmp, 256 if args.quick else 1024, repeats=3)
        emit("baseline.page_cache_write", disk, "MB/s", best_of=3)
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


def per_record_only(n: int) -> None:
    """``produce()`` per record alone, against a fresh broker (for before/after rounds)."""
    with tempfile.TemporaryDirectory(prefix="riverlog-bench-") as tmp:
        proc, servers = start_broker(os.path.join(tmp, "data"))
        try:
            rate = bench_per_record_produce(servers, n)
            emit("produce.per_record", rate, "rec/s", target=400_000, ratio_to_target=rate / 400_000,
                 records=n, load=round(os.getloadavg()[0], 2))
        finally:
            proc.terminate()
            proc.wait(30)


def latency_rounds(rounds: int, rate: int, seconds: float) -> None:
    """Produce -> poll() latency alone: ``rounds`` runs of :func:`bench_latency` (a topic each) on
    one fresh broker; the median and range of each round's p50 and p99, and the load average."""
    import statistics
    p50s, p99s, loads, shares = [], [], [], []
    with tempfile.TemporaryDirectory(prefix="riverlog-bench-") as tmp:
        proc, servers = start_broker(os.path.join(tmp, "data"))
        try:
            for i in range(rounds):
                cpu = {"broker": proc.pid}
                p50, p99 = bench_latency(servers, rate, seconds, f"latency-{i}", cpu)
                p50s.append(round(p50, 3))
                p99s.append(round(p99, 3))
                loads.append(round(os.getloadavg()[0], 2))
                shares.append({name: round(v, 3) for name, v in cpu.items()})
        finally:
            proc.terminate()
            proc.wait(30)
    for name, values, target in (("p50", p50s, 2.0), ("p99", p99s, 5.0)):
        emit(f"latency.end_to_end_{name}", statistics.median(values), "ms", rate=f"{rate} rec/s", target=target,
             rounds=values, load=loads)
    for name in ("broker", "consumer", "producer"):  # CPU moves less with the machine's load than time does
        values = [s[name] for s in shares]
        emit(f"latency.cpu_{name}", statistics.median(values), "CPU-s per s", rate=f"{rate} rec/s", rounds=values)


REPEATS = 5  # the page-cache baseline's best of: a single run ranged 190-5,600 MiB/s under load


def process_cpu_s(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` so far (Linux /proc)."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def large_batch_rounds(rounds: int, records: int) -> None:
    """The large-batch write (10 KB values, the same bytes as the baseline) and its baselines taken
    alternately: page cache (best of :data:`REPEATS`) and O_DIRECT. Medians, ranges and the load
    average; and each side's MiB per CPU-second (the broker's and the client's CPU together)."""
    import statistics
    mb = records * 10_000 >> 20
    cache, single, direct, broker, loads, how = [], [], [], [], [], ""
    cache_cpu, broker_cpu, broker_share = [], [], []
    with tempfile.TemporaryDirectory(prefix="riverlog-bench-") as tmp:
        proc, servers = start_broker(os.path.join(tmp, "data"))
        try:
            for i in range(rounds):
                cache.append(page_cache_write_mb_s(tmp, mb, repeats=REPEATS, runs=single, cpu_runs=cache_cpu))
                rate, how = disk_write_mb_s(tmp, min(mb, 512))
                direct.append(rate)
                on_client, started = [], process_cpu_s(proc.pid)
                broker.append(bench_bulk_produce(servers, records, f"large-{i}", value_size=10_000,
                                                 cpu=on_client)[1] * 1e6 / (1 << 20))
                on_broker = process_cpu_s(proc.pid) - started
                spent = on_client[0] + on_broker
                broker_share.append(round(on_broker / spent, 2))
                broker_cpu.append(records * 10_000 / (1 << 20) / spent)
                loads.append(round(os.getloadavg()[0], 2))
        finally:
            proc.terminate()
            proc.wait(30)

    def figure(name, values, unit="MiB/s", **extra):
        emit(name, statistics.median(values), unit, min=round(min(values), 1), max=round(max(values), 1),
             rounds=rounds, load=loads, **extra)
    figure("baseline.page_cache_write_single_runs", single, mib=mb)
    figure("baseline.page_cache_write", cache, best_of=REPEATS, mib=mb)
    figure("baseline.disk_write", direct, how=how, mib=min(mb, 512))
    figure("produce.large_batch_write", broker, mib=round(records * 10_000 / (1 << 20)))
    emit("produce.large_batch_write_vs_page_cache", statistics.median(broker) / statistics.median(cache), "ratio",
         per_round=[round(b / c, 3) for b, c in zip(broker, cache)], target_ratio=0.5)
    figure("baseline.page_cache_write_per_cpu_second", cache_cpu, unit="MiB per CPU-s (all runs)")
    figure("produce.large_batch_write_per_cpu_second", broker_cpu, unit="MiB per CPU-s, client and broker",
           broker_share=broker_share)
    emit("produce.large_batch_write_vs_page_cache_cpu", statistics.median(broker_cpu) / statistics.median(cache_cpu),
         "ratio of MiB per CPU-second")
    emit("produce.large_batch_write_vs_disk", statistics.median(broker) / statistics.median(direct), "ratio",
         per_round=[round(b / d, 3) for b, d in zip(broker, direct)])


if __name__ == "__main__":
    main()
