"""Scale benchmark: how one broker's cost grows with partitions, retained bytes and idle consumers.

One real broker process (``python -m broker broker start``, as bench/broker_bench.py starts it) on
a temporary data directory. Prints one JSON line per figure; nothing is asserted (BENCHMARKS.md
records the curves). Parts:

* ``partitions``: for each count (topics of up to 100 partitions each): topic creation time,
  produce (``produce_batch`` round-robin over every partition) and fetch (one consumer assigned
  every partition) throughput, then a clean restart: start-up time (process start -> a metadata
  reply naming every partition with a leader -> the last partition's offsets answered), idle CPU
  (% of one core over ``--idle-seconds`` with no client connected) and RSS.
* ``retained``: ``--retained-gb`` of 10 KB records in one partition (1 GiB segments), start-up
  after a clean shutdown, then recovery after ``kill -9`` in the middle of a write (bytes past the
  recovery point are what the broker must scan).
* ``consumers``: ``--consumers`` idle consumers (each assigned its own partition at the end,
  long-polling) in ``--consumer-processes`` client processes: broker idle CPU and RSS, then
  per-record produce latency and bulk throughput while they stay connected, against the same
  with none connected.
* ``restarts`` (not in the default run): clean restarts with ``--restart-partitions``, alternating
  with ``--compare-tree`` (the code before a change) for ``--rounds`` rounds.

    python bench/scale_bench.py                                   # everything (~15 min, 10 GB disk)
    python bench/scale_bench.py --parts partitions --partitions 1,100 --idle-seconds 3
    python bench/scale_bench.py --parts retained --retained-gb 1
    python bench/scale_bench.py --parts restarts --compare-tree /tmp/before --rounds 3   # A/B of clean restarts
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from broker_bench import process_cpu_s  # noqa: E402

TOPIC_SIZE = 100


def emit(name, value, unit, **extra):
    print(json.dumps({"figure": name, "value": round(value, 3), "unit": unit,
                      "load": os.getloadavg()[0], **extra}), flush=True)


# ------------------------------------------------------------------------------ broker process
class Broker:
    """A broker process on ``data_dir`` running the code in ``root`` (this checkout by default)."""

    def __init__(self, data_dir: str, *configs: str, root: str = ROOT):
        cmd = [sys.executable, "-m", "broker", "broker", "start", "--data-dir", data_dir, "--port", "0",
               "--log-level", "WARNING"]
        for c in configs:
            cmd += ["--config", c]
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(cmd, cwd=root, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            raise RuntimeError(f"broker did not start: {line}")
        self.listening = time.perf_counter() - t0
        self.servers = line.strip().rsplit(" ", 1)[1]
        self.t0 = t0

    @property
    def pid(self) -> int:
        return self.proc.pid

    def serving(self, topics: dict[str, int], timeout: float = 600) -> float:
        """Seconds from spawn until metadata names every partition of ``topics`` with a leader and
        the last partition's offsets are answered (its log is open)."""
        from broker.client import Consumer, TopicPartition
        c = Consumer({"bootstrap.servers": self.servers})
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                try:
                    md = c.list_topics(timeout=10)
                    if all(t in md.topics and len(md.topics[t].partitions) == n
                           and all(p.leader >= 0 for p in md.topics[t].partitions.values())
                           for t, n in topics.items()):
                        last = max(topics)
                        c.get_watermark_offsets(TopicPartition(last, topics[last] - 1), timeout=10)
                        return time.perf_counter() - self.t0
                except Exception:  # noqa: BLE001 - not serving yet
                    pass
                time.sleep(0.05)
        finally:
            c.close()
        raise RuntimeError("broker did not serve every partition in time")

    def idle(self, seconds: float) -> tuple[float, float]:
        """(% of one core used over ``seconds``, RSS MiB)."""
        before, t = process_cpu_s(self.pid), time.perf_counter()
        time.sleep(seconds)  # the measurement window itself
        cpu = (process_cpu_s(self.pid) - before) / (time.perf_counter() - t) * 100
        return cpu, rss_mib(self.pid)

    def stop(self) -> float:
        """Clean shutdown (SIGTERM); seconds it took."""
        t = time.perf_counter()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(300)
        return time.perf_counter() - t

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(30)


def rss_mib(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def thread_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def layout(partitions: int) -> dict[str, int]:
    """Topics of up to :data:`TOPIC_SIZE` partitions holding ``partitions`` in all."""
    topics, left, i = {}, partitions, 0
    while left > 0:
        topics[f"scale-{i:03d}"] = min(TOPIC_SIZE, left)
        left -= TOPIC_SIZE
        i += 1
    return topics


def create_topics(servers: str, topics: dict[str, int], **configs) -> None:
    from broker.client import AdminClient, NewTopic
    names = list(topics)
    with AdminClient({"bootstrap.servers": servers}) as admin:
        for i in range(0, len(names), 5):  # a few topics a request: 50 of 100 partitions outlast its timeout
            futures = admin.create_topics([NewTopic(t, topics[t], config=configs) for t in names[i:i + 5]])
            for f in futures.values():
                f.result()


# ------------------------------------------------------------------------------ partitions
def produce_spread(servers: str, topics: dict[str, int], records: int, value_size: int = 100) -> float:
    """records/s of ``produce_batch`` calls going round-robin over every partition."""
    import pyarrow as pa
    from broker.client import Producer
    count = sum(topics.values())
    piece = max(1, min(10_000, records // count))
    table = pa.table({"value": pa.array([b"x" * value_size] * piece)})
    p = Producer({"bootstrap.servers": servers, "acks": "1", "linger.ms": 5})
    sent, start = 0, time.perf_counter()
    while sent < records:
        for topic, n in topics.items():
            for partition in range(n):
                while True:
                    try:
                        p.produce_batch(topic, table, partition=partition)
                        break
                    except BufferError:
                        p.poll(0.01)
                sent += piece
    p.flush(600)
    elapsed = time.perf_counter() - start
    p.close()
    return sent / elapsed


def consume_all(servers: str, topics: dict[str, int], records: int) -> float:
    """records/s of one consumer assigned every partition, reading ``records`` from the beginning."""
    from broker.client import OFFSET_BEGINNING, Consumer, TopicPartition
    c = Consumer({"bootstrap.servers": servers})
    c.assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, n in topics.items() for p in range(n)])
    got, start = 0, time.perf_counter()
    while got < records:
        t = c.poll_batch(30)
        if t is None:
            break
        got += t.num_rows
    elapsed = time.perf_counter() - start
    c.close()
    return got / elapsed


def bench_partitions(counts: list[int], records: int, idle_seconds: float) -> None:
    for count in counts:
        topics = layout(count)
        shape = {"partitions": count, "topics": len(topics)}
        with tempfile.TemporaryDirectory(prefix="riverlog-scale-") as tmp:
            data = os.path.join(tmp, "data")
            broker = Broker(data)
            try:
                t = time.perf_counter()
                create_topics(broker.servers, topics)
                broker.serving(topics)
                emit("partitions.create", time.perf_counter() - t, "s", **shape)
                sent = produce_spread(broker.servers, topics, records)
                emit("partitions.produce_spread", sent, "rec/s", records=records, **shape)
                emit("partitions.fetch_all", consume_all(broker.servers, topics, records), "rec/s",
                     records=records, **shape)
                cpu, rss = broker.idle(idle_seconds)
                emit("partitions.idle_cpu_after_clients", cpu, "% of a core", seconds=idle_seconds, **shape)
            finally:
                emit("partitions.clean_shutdown", broker.stop(), "s", **shape)
            broker = Broker(data)
            try:
                emit("partitions.startup", broker.serving(topics), "s", listening_s=round(broker.listening, 3),
                     **shape)
                cpu, rss = broker.idle(idle_seconds)
                emit("partitions.idle_cpu", cpu, "% of a core", seconds=idle_seconds,
                     threads=thread_count(broker.pid), **shape)
                emit("partitions.rss", rss, "MiB", **shape)
            finally:
                broker.stop()


# ------------------------------------------------------------------------------ restarts, A/B
def bench_restarts(count: int, rounds: int, records: int, trees: dict[str, str]) -> None:
    """Clean restarts of a broker holding ``count`` partitions with data, each tree's code taking
    turns (``--compare-tree``: the code before a change, e.g. from ``git archive``) on a data
    directory of its own: start-up with data written since the last start (one leader-epoch write
    per partition), the clean stop after it (nothing written), a second start-up (the epoch left
    empty by the first start is cut) and its stop. Medians and ranges over the rounds."""
    import statistics
    topics = layout(count)
    figures: dict[tuple[str, str], list[float]] = {}
    loads = []
    with tempfile.TemporaryDirectory(prefix="riverlog-scale-") as tmp:
        for name, root in trees.items():
            data = os.path.join(tmp, name)
            broker = Broker(data, root=root)
            try:
                create_topics(broker.servers, topics)
                broker.serving(topics)
                produce_spread(broker.servers, topics, records)
            finally:
                broker.stop()
        for _ in range(rounds):
            for name, root in trees.items():
                data = os.path.join(tmp, name)
                for step in ("first", "second"):
                    broker = Broker(data, root=root)
                    try:
                        figures.setdefault((name, f"startup_{step}"), []).append(broker.serving(topics))
                    finally:
                        figures.setdefault((name, f"idle_shutdown_{step}"), []).append(broker.stop())
                loads.append(round(os.getloadavg()[0], 1))
    for (name, what), values in figures.items():
        emit(f"restarts.{what}", statistics.median(values), "s", tree=name, partitions=count, rounds=rounds,
             min=round(min(values), 2), max=round(max(values), 2), loads=loads)


# ------------------------------------------------------------------------------ retained log
def _writer(servers: str, topic: str, value_size: int, rows: int) -> None:
    import pyarrow as pa
    from broker.client import Producer
    table = pa.table({"value": pa.array([b"y" * value_size] * rows)})
    p = Producer({"bootstrap.servers": servers, "acks": "1", "linger.ms": 5})
    while True:
        try:
            p.produce_batch(topic, table)
        except BufferError:
            p.poll(0.01)


def past_recovery_point(directory: str) -> tuple[int, int]:
    """(bytes of .log files at or past the recovery point, bytes of all .log files) of one partition."""
    from broker.storage.checkpoint import read_int
    point = read_int(os.path.join(directory, "recovery-point"), 0)
    bases = sorted(int(n[:-4]) for n in os.listdir(directory) if n.endswith(".log") and n[:-4].isdigit())
    sizes = [os.path.getsize(os.path.join(directory, f"{b:020d}.log")) for b in bases]
    past = sum(s for b, nb, s in zip(bases, bases[1:] + [None], sizes) if nb is None or nb > point)
    return past, sum(sizes)


def bench_retained(gigabytes: float, workdir: str | None) -> None:
    from broker_bench import bench_bulk_produce
    value_size, rows = 10_000, 10_000
    topics = {"retained": 1}
    tmp = tempfile.mkdtemp(prefix="riverlog-scale-retained-", dir=workdir)
    try:
        data = os.path.join(tmp, "data")
        broker = Broker(data)
        try:
            create_topics(broker.servers, topics)
            records = max(rows, int(gigabytes * 1e9 / value_size) // rows * rows)
            t = time.perf_counter()
            _, mb_s = bench_bulk_produce(broker.servers, records, "retained", value_size=value_size, create=False)
            emit("retained.write", mb_s, "MB/s", gb=round(records * value_size / 1e9, 2),
                 seconds=round(time.perf_counter() - t, 1))
        finally:
            emit("retained.clean_shutdown", broker.stop(), "s")
        size = past_recovery_point(os.path.join(data, "retained-0"))[1]
        shape = {"log_gb": round(size / 1e9, 2)}
        broker = Broker(data)
        emit("retained.startup_clean", broker.serving(topics), "s", listening_s=round(broker.listening, 3), **shape)
        cpu, rss = broker.idle(3)
        emit("retained.rss", rss, "MiB", **shape)
        writer = mp.Process(target=_writer, args=(broker.servers, "retained", value_size, 1_000), daemon=True)
        writer.start()
        directory = os.path.join(data, "retained-0")
        base = past_recovery_point(directory)[1]
        deadline = time.monotonic() + 120
        while past_recovery_point(directory)[1] < base + 600e6 and time.monotonic() < deadline:
            time.sleep(0.1)
        broker.kill()
        writer.terminate()
        writer.join(10)
        scan, size = past_recovery_point(directory)
        broker = Broker(data)
        try:
            emit("retained.recovery_after_kill9", broker.serving(topics), "s", listening_s=round(broker.listening, 3),
                 bytes_past_recovery_point=scan, log_gb=round(size / 1e9, 2))
        finally:
            broker.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ------------------------------------------------------------------------------ idle consumers
def _idle_consumers(servers: str, topic: str, partitions: list[int], ready, stop) -> None:
    from broker.client import OFFSET_END, Consumer, TopicPartition
    consumers = []
    for p in partitions:
        c = Consumer({"bootstrap.servers": servers, "fetch.max.wait.ms": 500})
        c.assign([TopicPartition(topic, p, OFFSET_END)])
        consumers.append(c)
    for c in consumers:
        c.poll(0)
    ready.set()
    while not stop.is_set():
        for c in consumers:
            c.poll(0)
        stop.wait(0.5)
    for c in consumers:
        c.close()


def latency_and_throughput(servers: str, topic: str, records: int) -> tuple[float, float, float]:
    """(p50 ms, p99 ms) of acks=1 produce round trips at ~1,000/s for 2 s, and bulk rec/s."""
    from broker_bench import bench_bulk_produce
    from broker.client import Producer
    p = Producer({"bootstrap.servers": servers, "acks": "1", "linger.ms": 0})
    lat = []
    for _ in range(2000):
        t = time.perf_counter()
        p.produce(topic, b"z" * 100)
        p.flush(10)
        lat.append((time.perf_counter() - t) * 1000)
    p.close()
    lat.sort()
    rate, _ = bench_bulk_produce(servers, records, topic, create=False)
    return lat[len(lat) // 2], lat[int(len(lat) * 0.99)], rate


def bench_consumers(count: int, processes: int, records: int, idle_seconds: float) -> None:
    with tempfile.TemporaryDirectory(prefix="riverlog-scale-") as tmp:
        broker = Broker(os.path.join(tmp, "data"))
        try:
            create_topics(broker.servers, {"idle": count, "load": 1})
            broker.serving({"idle": count, "load": 1})
            cpu, rss = broker.idle(idle_seconds)
            emit("consumers.idle_cpu", cpu, "% of a core", consumers=0, threads=thread_count(broker.pid))
            emit("consumers.rss", rss, "MiB", consumers=0)
            p50, p99, rate = latency_and_throughput(broker.servers, "load", records)
            emit("consumers.produce_p50", p50, "ms", consumers=0, p99_ms=round(p99, 3))
            emit("consumers.produce_bulk", rate, "rec/s", consumers=0)
            ready, stop = [mp.Event() for _ in range(processes)], mp.Event()
            procs = [mp.Process(target=_idle_consumers, args=(broker.servers, "idle", list(range(i, count, processes)),
                                                              ready[i], stop), daemon=True)
                     for i in range(processes)]
            for p in procs:
                p.start()
            for e in ready:
                e.wait(120)
            time.sleep(2)  # let the first long polls settle before the window opens
            cpu, rss = broker.idle(idle_seconds)
            emit("consumers.idle_cpu", cpu, "% of a core", consumers=count, processes=processes,
                 threads=thread_count(broker.pid))
            emit("consumers.rss", rss, "MiB", consumers=count)
            p50, p99, rate = latency_and_throughput(broker.servers, "load", records)
            emit("consumers.produce_p50", p50, "ms", consumers=count, p99_ms=round(p99, 3))
            emit("consumers.produce_bulk", rate, "rec/s", consumers=count)
            stop.set()
            for p in procs:
                p.join(60)
        finally:
            broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", default="partitions,retained,consumers")
    parser.add_argument("--partitions", default="1,100,1000,5000", help="partition counts, comma-separated")
    parser.add_argument("--records", type=int, default=500_000, help="records produced and fetched per run")
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--retained-gb", type=float, default=10.0)
    parser.add_argument("--workdir", default=None, help="where the retained log goes (default: the temp dir)")
    parser.add_argument("--consumers", type=int, default=200)
    parser.add_argument("--consumer-processes", type=int, default=4)
    parser.add_argument("--restart-partitions", type=int, default=1000, help="part restarts: partitions")
    parser.add_argument("--rounds", type=int, default=3, help="part restarts: alternating rounds")
    parser.add_argument("--compare-tree", default=None, help="part restarts: another checkout to alternate with")
    args = parser.parse_args()
    parts = args.parts.split(",")
    emit("machine", os.cpu_count(), "cpus", loadavg=open("/proc/loadavg").read().split()[:3])
    if "partitions" in parts:
        bench_partitions([int(x) for x in args.partitions.split(",")], args.records, args.idle_seconds)
    if "retained" in parts:
        bench_retained(args.retained_gb, args.workdir)
    if "restarts" in parts:
        trees = {"this": ROOT, **({"compare": args.compare_tree} if args.compare_tree else {})}
        bench_restarts(args.restart_partitions, args.rounds, args.records, trees)
    if "consumers" in parts:
        bench_consumers(args.consumers, args.consumer_processes, args.records, args.idle_seconds)


if __name__ == "__main__":
    main()
