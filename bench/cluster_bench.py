"""Replicated cluster benchmark: three nodes with RF=3 and acks=all against one node with RF=1.

Prints one JSON line per figure. The baseline (one broker, RF=1, same producer, same records) is
measured in the same run; the figure is the ratio. Failover time is measured from the kill -9 of a
partition leader to the first successful ``acks=all`` produce, over several rounds. Nothing here is
asserted; BENCHMARKS.md records the figures.

    python bench/cluster_bench.py [--records 300000] [--rounds 5] [--quick]
    python bench/cluster_bench.py --bulk-only [--rounds 3] [--before /tmp/old-tree] [--profile DIR]
    python bench/cluster_bench.py --failover-only [--rounds 3] [--before /tmp/old-tree]

``--bulk-only`` measures only the bulk ratio, ``--rounds`` times; with ``--before`` each round
measures that tree's nodes (a ``git archive`` of an earlier commit) and then this tree's, so a
change is judged against its baseline in the same time window. Every bulk figure carries the CPU
seconds each node process spent (``/proc``) and the load average; ``--profile`` runs the cluster's
nodes under ``profile_node.py`` and leaves one ``.prof`` per node.
"""
from __future__ import annotations

import argparse
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from broker_bench import bench_bulk_produce, bench_per_record_produce, emit  # noqa: E402 - beside this file

TOPIC_CONFIG = {"min.insync.replicas": "2"}


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class Node:
    """One node process: a broker, and a controller when a quorum is given."""

    def __init__(self, data_dir: str, port: int, node_id: int | None = None, quorum: str | None = None,
                 tree: str = ROOT, profile: str | None = None):
        self.data_dir, self.port, self.node_id, self.quorum = data_dir, port, node_id, quorum
        self.tree, self.profile = tree, profile
        self.proc: subprocess.Popen | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "Node":
        cmd = [sys.executable, "-m", "broker", "broker", "start", "--data-dir", self.data_dir,
               "--port", str(self.port), "--log-level", "ERROR"]
        if self.profile:
            cmd[1:3] = [os.path.join(ROOT, "bench", "profile_node.py"), self.profile]
        if self.node_id is not None:
            cmd += ["--node-id", str(self.node_id), "--controller-quorum", self.quorum]
        self.proc = subprocess.Popen(cmd, cwd=self.tree, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, start_new_session=True)
        line = self.proc.stdout.readline()
        if "listening on" not in line:
            raise RuntimeError(f"node did not start: {line!r}")
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()
        return self

    def cpu_seconds(self) -> float:
        """User + system CPU of the node process so far (all its threads), from /proc."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def thread_cpu(self) -> dict[str, float]:
        """CPU seconds per thread, by name: Python's names when profiled (``profile_node.py``
        writes them), the OS's (gRPC's C threads name themselves) otherwise."""
        names = {}
        if self.profile and os.path.exists(self.profile + ".threads"):
            with open(self.profile + ".threads") as f:
                names = dict(line.rstrip("\n").split(" ", 1) for line in f if " " in line)
        found: dict[str, float] = {}
        for tid in os.listdir(f"/proc/{self.proc.pid}/task"):
            try:
                with open(f"/proc/{self.proc.pid}/task/{tid}/stat") as f:
                    comm, rest = f.read().split(" (", 1)[1].rsplit(")", 1)
            except OSError:
                continue
            fields = rest.split()
            name = names.get(tid, comm)
            found[name] = found.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return found

    def kill9(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.kill9()


def start_cluster(root: str, n: int, tree: str = ROOT, profile: str | None = None) -> list[Node]:
    ports = free_ports(2 * n)
    quorum = ",".join(f"{i + 1}@127.0.0.1:{ports[n + i]}" for i in range(n))
    nodes = [Node(os.path.join(root, f"node-{i + 1}"), ports[i], i + 1, quorum, tree,
                  profile and os.path.join(profile, f"node-{i + 1}.prof")) for i in range(n)]
    for node in nodes:
        node.start()
    wait(lambda: _active_brokers(nodes) >= n, 60, "all brokers registered")
    return nodes


def _active_brokers(nodes: list[Node]) -> int:
    from broker.client import AdminClient
    try:
        with AdminClient({"bootstrap.servers": bootstrap(nodes), "request.timeout.ms": 3000}) as admin:
            info = admin.describe_cluster().result(5)
        return sum(1 for n in info.nodes if n.broker and not n.fenced) if info.controller else 0
    except Exception:  # noqa: BLE001 - not up yet
        return 0


def bootstrap(nodes: list[Node]) -> str:
    return ",".join(n.address for n in nodes if n.proc and n.proc.poll() is None)


def wait(condition, timeout: float, what: str):
    from broker.errors import RiverlogError
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = condition()
        except RiverlogError:  # a metadata call that timed out on a loaded machine: ask again
            value = None
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError(f"timed out waiting for {what}")


def partitions(servers: str, topic: str):
    from broker.client import AdminClient
    with AdminClient({"bootstrap.servers": servers, "request.timeout.ms": 3000}) as admin:
        info = admin.list_topics(topic).topics[topic]
    return {} if info.error else info.partitions


def create_topic(servers: str, name: str, partitions_: int, rf: int) -> None:
    from broker.client import AdminClient, NewTopic
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.create_topics([NewTopic(name, partitions_, rf, TOPIC_CONFIG if rf > 1 else {})])[name].result(30)
    wait(lambda: (lambda ps: ps and all(p.leader >= 0 and len(p.isr) == rf for p in ps.values()))(
        partitions(servers, name)), 30, f"{name}: leaders and a full ISR")


# ------------------------------------------------------------------------------ throughput
def per_record_rate(servers: str, topic: str, n: int) -> float:
    return bench_per_record_produce(servers, n, topic, acks="all", create=False)


def bulk_rate(servers: str, topic: str, n: int) -> float:
    return bench_bulk_produce(servers, n, topic, acks="all", create=False)[0]


# ------------------------------------------------------------------------------ failover
def active_controller(servers: str) -> int:
    from broker.client import AdminClient
    with AdminClient({"bootstrap.servers": servers, "request.timeout.ms": 3000}) as admin:
        info = admin.describe_cluster().result(5)
    return info.controller.id if info.controller else -1


def pick_partition(nodes: list[Node], topic: str, led_by_controller: bool) -> int:
    """A partition whose leader is (or is not) also the active controller; waits for leadership to
    come back to preferred replicas when none fits yet."""
    def find():
        servers = bootstrap(nodes)
        controller = active_controller(servers)
        return next((p for p, info in sorted(partitions(servers, topic).items())
                     if info.leader >= 0 and (info.leader == controller) == led_by_controller), None)
    return wait(lambda: (lambda p: None if p is None else (p,))(find()), 60, "a partition to fail over")[0]


def failover_seconds(nodes: list[Node], topic: str, partition: int) -> float:
    """Kill -9 the leader of ``topic``-``partition``; seconds until an acks=all produce to it
    succeeds; then heal."""
    from broker.client import Producer
    servers = bootstrap(nodes)
    leader = partitions(servers, topic)[partition].leader
    victim = next(n for n in nodes if n.node_id == leader)
    producer = Producer({"bootstrap.servers": servers, "acks": "all", "linger.ms": 0,
                         "retry.backoff.ms": 20, "delivery.timeout.ms": 60_000})
    producer.produce(topic, b"warm-up", partition=partition)
    producer.flush(30)
    done = threading.Event()
    outcome: list = []

    def delivered(err, msg):
        outcome.append(err)
        done.set()

    victim.kill9()
    killed = time.perf_counter()
    producer.produce(topic, b"after the kill", partition=partition, on_delivery=delivered)
    while not done.is_set():
        producer.poll(0.005)
    elapsed = time.perf_counter() - killed
    producer.close()
    if outcome[0] is not None:
        raise RuntimeError(f"produce after failover failed: {outcome[0]}")
    victim.start()
    wait(lambda: all(len(p.isr) == 3 for p in partitions(bootstrap(nodes), topic).values()), 120,
         "the killed replica to rejoin")
    return elapsed


# ------------------------------------------------------------------------------ bulk only, before/after
def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def bulk_round(tmp: str, n: int, tree: str, label: str, profile: str | None = None) -> float:
    """One bulk ratio with ``tree``'s nodes: the single-node baseline, then the cluster."""
    single = Node(os.path.join(tmp, "single"), free_ports(1)[0], tree=tree).start()
    try:
        create_topic(single.address, "bulk", 3, 1)
        single_cpu0, base_producer_cpu = single.cpu_seconds(), []
        base = bench_bulk_produce(single.address, n, "bulk", acks="all", create=False, cpu=base_producer_cpu)[0]
        single_cpu = round(single.cpu_seconds() - single_cpu0, 2)
    finally:
        single.stop()
    nodes = start_cluster(os.path.join(tmp, "cluster"), 3, tree, profile)
    try:
        servers = bootstrap(nodes)
        create_topic(servers, "bulk", 3, 3)
        leaders = sorted(p.leader for p in partitions(servers, "bulk").values())
        cpu0, producer_cpu = [node.cpu_seconds() for node in nodes], []
        threads0 = [node.thread_cpu() for node in nodes] if profile else []
        rate = bench_bulk_produce(servers, n, "bulk", acks="all", create=False, cpu=producer_cpu)[0]
        cpu = [round(node.cpu_seconds() - c, 2) for node, c in zip(nodes, cpu0)]
        for node, before in zip(nodes, threads0):
            spent = {k: round(v - before.get(k, 0.0), 2) for k, v in node.thread_cpu().items()}
            emit("cluster.node_thread_cpu", sum(spent.values()), "s", node=node.node_id,
                 threads={k: v for k, v in sorted(spent.items(), key=lambda kv: -kv[1]) if v > 0})
    finally:
        for node in nodes:
            node.stop()
    emit("cluster.rf3_acks_all.bulk", rate, "rec/s", tree=label, baseline=round(base), ratio=round(rate / base, 3),
         node_cpu_s=cpu, producer_cpu_s=round(producer_cpu[0], 2), seconds=round(n / rate, 2),
         baseline_node_cpu_s=single_cpu, baseline_producer_cpu_s=round(base_producer_cpu[0], 2),
         leaders=leaders, loadavg=loadavg())
    return rate / base


def bulk_only(args, n: int) -> None:
    before = [os.path.abspath(t) for t in args.before.split(",")] if args.before else []
    trees = [(("before" if len(before) == 1 else os.path.basename(t)), t) for t in before]
    trees.append(("after" if before else "this", ROOT))
    ratios: dict[str, list[float]] = {label: [] for label, _ in trees}
    for r in range(args.rounds):
        for label, tree in trees:
            with tempfile.TemporaryDirectory(prefix="riverlog-cluster-bench-") as tmp:
                profile = args.profile and os.path.join(args.profile, f"{label}-{r}")
                if profile:
                    os.makedirs(profile, exist_ok=True)
                ratios[label].append(bulk_round(tmp, n, tree, label, profile))
    for label, values in ratios.items():
        emit("cluster.rf3_acks_all.bulk.ratio_median", statistics.median(values), "ratio", tree=label,
             all=[round(v, 3) for v in values], loadavg=loadavg())


def failover_only(args, rounds: int) -> None:
    """The failover figures of each tree in turn (``--before`` first), each on a fresh cluster."""
    before = [os.path.abspath(t) for t in args.before.split(",")] if args.before else []
    trees = [(("before" if len(before) == 1 else os.path.basename(t)), t) for t in before]
    trees.append(("after" if before else "this", ROOT))
    for label, tree in trees:
        with tempfile.TemporaryDirectory(prefix="riverlog-cluster-bench-") as tmp:
            nodes = start_cluster(os.path.join(tmp, "cluster"), 3, tree)
            try:
                create_topic(bootstrap(nodes), "failover", 3, 3)
                for kind, with_controller in (("leader", False), ("leader_and_active_controller", True)):
                    times = [failover_seconds(nodes, "failover", pick_partition(nodes, "failover", with_controller))
                             for _ in range(rounds)]
                    emit(f"cluster.failover_to_first_produce_p50.{kind}", statistics.median(times), "s", target=2.0,
                         tree=label, rounds=rounds, all=[round(t, 3) for t in times], loadavg=loadavg())
            finally:
                for node in nodes:
                    node.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="smaller runs, for a smoke check")
    parser.add_argument("--bulk-only", action="store_true", help="only the bulk ratio, --rounds times")
    parser.add_argument("--before", help="with --bulk-only or --failover-only: a tree (or several, comma-separated) "
                        "whose nodes are measured before this one's")
    parser.add_argument("--failover-only", action="store_true", help="only the failover figures, --rounds each")
    parser.add_argument("--profile", help="with --bulk-only: write each cluster node's cProfile here")
    args = parser.parse_args()
    n = 50_000 if args.quick else args.records
    rounds = 2 if args.quick else args.rounds
    emit("machine", os.cpu_count(), "cpus", python=platform.python_version(), platform=platform.platform())
    if args.bulk_only:
        return bulk_only(args, n * 5)
    if args.failover_only:
        return failover_only(args, rounds)
    with tempfile.TemporaryDirectory(prefix="riverlog-cluster-bench-") as tmp:
        single = Node(os.path.join(tmp, "single"), free_ports(1)[0]).start()
        try:
            create_topic(single.address, "per-record", 3, 1)
            create_topic(single.address, "bulk", 3, 1)
            base_per_record = per_record_rate(single.address, "per-record", n)
            base_bulk = bulk_rate(single.address, "bulk", n * 5)
        finally:
            single.stop()
        emit("baseline.one_broker_rf1.per_record", base_per_record, "rec/s", acks="all")
        emit("baseline.one_broker_rf1.bulk", base_bulk, "rec/s", acks="all")

        nodes = start_cluster(os.path.join(tmp, "cluster"), 3)
        try:
            servers = bootstrap(nodes)
            create_topic(servers, "per-record", 3, 3)
            create_topic(servers, "bulk", 3, 3)
            rate = per_record_rate(servers, "per-record", n)
            emit("cluster.rf3_acks_all.per_record", rate, "rec/s", baseline=round(base_per_record),
                 ratio=round(rate / base_per_record, 3), target_ratio=0.5)
            rate = bulk_rate(servers, "bulk", n * 5)
            emit("cluster.rf3_acks_all.bulk", rate, "rec/s", baseline=round(base_bulk),
                 ratio=round(rate / base_bulk, 3), target_ratio=0.5)
            create_topic(servers, "failover", 3, 3)
            # A leader on a broker-only node, and one whose node is also the active controller: then
            # a Raft election and the new controller's full session for every broker come first.
            for kind, with_controller in (("leader", False), ("leader_and_active_controller", True)):
                times = [failover_seconds(nodes, "failover", pick_partition(nodes, "failover", with_controller))
                         for _ in range(rounds)]
                emit(f"cluster.failover_to_first_produce_p50.{kind}", statistics.median(times), "s", target=2.0,
                     rounds=rounds, all=[round(t, 3) for t in times])
        finally:
            for node in nodes:
                node.stop()


if __name__ == "__main__":
    main()
