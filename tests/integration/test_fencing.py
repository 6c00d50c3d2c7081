"""Fencing against real broker processes: a transactional producer fenced by a newer instance with
its transactional.id stays fenced (fatal ``ProducerFencedError``) and never commits again, also in
a consume-transform-produce loop whose instances are killed and paused at random points; an
idempotent producer's new epoch (KIP-360) comes from the broker."""
from __future__ import annotations

import collections
import random
import threading
import time

import pytest

from broker.client import OFFSET_BEGINNING, AdminClient, Consumer, Producer, TopicPartition
from broker.errors import KafkaError, ProducerFencedError, RiverlogError
from tests.conftest import wait_until
from tests.integration.test_transactions import make_topics, read

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

CONFIG = {"group.min.session.timeout.ms": 300}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    from tests.conftest import BrokerProcess
    b = BrokerProcess(str(tmp_path_factory.mktemp("fencing")), CONFIG).start()
    yield b
    b.kill9()


def _outcome(action):
    """None when ``action()`` went through, else the exception it raised."""
    try:
        action()
    except Exception as e:  # noqa: BLE001 - the test inspects it
        return e
    return None


def test_a_fenced_producer_stays_fenced_and_never_commits(broker, topic_name):
    make_topics(broker.bootstrap, topic_name, partitions=1)
    txn_id = f"{topic_name}-app"
    zombie = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id, "linger.ms": 1})
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(topic_name, value=b"zombie-0", partition=0)
    assert zombie.flush(30) == 0
    successor = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": txn_id, "linger.ms": 1})
    successor.init_transactions(30)          # fences the zombie and aborts its open transaction

    # The zombie goes on as an application would: its next batch is refused for its old epoch;
    # whatever fails, it aborts and tries again with a new transaction.
    reports, errors, zombie_commits = [], [], 0
    zombie.produce(topic_name, value=b"zombie-1", partition=0, on_delivery=lambda err, msg: reports.append(err))
    zombie.flush(30)
    errors.append(_outcome(lambda: zombie.commit_transaction(10)))
    for round_ in range(3):
        errors.append(_outcome(lambda: zombie.abort_transaction(10)))
        errors.append(_outcome(zombie.begin_transaction))
        errors.append(_outcome(lambda: zombie.produce(topic_name, value=b"zombie-later-%d" % round_, partition=0,
                                                      on_delivery=lambda err, msg: reports.append(err))))
        zombie.flush(10)
        error = _outcome(lambda: zombie.commit_transaction(10))
        errors.append(error)
        zombie_commits += error is None

    # The successor writes under the producer id and epoch the zombie must never get.
    successor.begin_transaction()
    for i in range(3):
        successor.produce(topic_name, value=b"successor-%d" % i, partition=0)
    successor.commit_transaction(30)

    assert zombie_commits == 0
    assert read(broker.bootstrap, topic_name, "read_committed", partitions=1) == [
        b"successor-0", b"successor-1", b"successor-2"]
    # Fenced is fatal: every later call fails with the same typed error, which says what to do.
    assert reports and all(isinstance(e.exception(), ProducerFencedError) for e in reports), reports
    assert all(isinstance(e, ProducerFencedError) for e in errors), errors
    # As confluent-kafka reports a fenced producer: librdkafka's _FENCED, fatal.
    assert all(e.args[0].code() == KafkaError._FENCED and e.args[0].fatal() for e in errors), errors
    assert "init_transactions" in str(errors[0]) and "close" in str(errors[0])
    zombie.close(5)
    successor.close()


# ------------------------------------------------------------------------------------------
# A consume-transform-produce loop run by instances that are killed or paused at random points.

INPUT_RECORDS = 240


class _Run:
    """What the instances share: the commits they made and when each was fenced."""

    def __init__(self, bootstrap: str, src: str, dst: str, seed: int):
        self.seed = seed
        self.bootstrap, self.src, self.dst = bootstrap, src, dst
        self.txn_id = self.group = f"etl-{dst}"
        self.lock = threading.Lock()
        self.commits: list[tuple[int, int, int, float]] = []   # (instance, epoch at init, epoch at commit, start)
        self.fenced_at: dict[int, float] = {}                   # instance -> when a successor's init returned
        self.fenced_errors: dict[int, ProducerFencedError] = {}
        self.inited = collections.defaultdict(threading.Event)
        self.resume = collections.defaultdict(threading.Event)
        self.stopped = collections.defaultdict(threading.Event)  # killed, paused, fenced or finished
        self.paused: set[int] = set()
        self.leftovers: list = []
        self.plans: dict[int, tuple] = {}

    def summary(self) -> str:
        return (f"seed {self.seed}; plans {self.plans}; commits (instance, epoch) "
                f"{[(i, e) for i, e, _, _ in self.commits]}; fenced {sorted(self.fenced_at)}; "
                f"told fenced {sorted(self.fenced_errors)}; paused {sorted(self.paused)}")


def _instance(run: _Run, n: int, plan: tuple[str, int, str]) -> None:
    """One application instance; ``plan`` = (kill|pause|none, after how many commits, at which point)."""
    what, after, point = plan
    rng = random.Random(run.seed * 1000 + n)
    parts = [TopicPartition(run.src, p) for p in range(2)]
    producer = Producer({"bootstrap.servers": run.bootstrap, "transactional.id": run.txn_id, "linger.ms": 1})
    consumer = Consumer({"bootstrap.servers": run.bootstrap, "group.id": run.group, "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    run.leftovers += [producer, consumer]
    try:
        producer.init_transactions(30)
        epoch = producer._manager.producer_epoch
        with run.lock:
            now = time.monotonic()
            for older in range(1, n):
                run.fenced_at.setdefault(older, now)
        run.inited[n].set()
        for older in list(run.paused):    # zombies resume once this instance has fenced them
            run.resume[older].set()

        def rewind():
            consumer.assign([TopicPartition(run.src, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
                             for tp in consumer.committed(parts, timeout=30)])

        def stop_here(at: str) -> bool:
            """True when this instance dies here; a paused one waits to be fenced, then goes on."""
            if what == "none" or at != point or commits_done < after:
                return False
            if what == "kill":
                return True
            with run.lock:
                run.paused.add(n)
            run.stopped[n].set()
            assert run.resume[n].wait(60), f"instance {n} was never resumed"
            return False

        rewind()
        ends = {p: INPUT_RECORDS // 2 for p in range(2)}
        commits_done = 0
        while True:
            if all(tp.offset >= ends[tp.partition] for tp in consumer.position(consumer.assignment())):
                return
            if stop_here("before_begin"):
                return
            msgs = [m for m in consumer.consume(rng.randint(5, 30), 0.5) if m.error() is None]
            if not msgs:
                continue
            try:
                producer.begin_transaction()
                # One record to each partition first, so that a zombie paused in between has every
                # partition in its transaction and the rest of its records reach the partitions.
                firsts = list({m.partition(): m for m in reversed(msgs)}.values())
                for m in firsts:
                    producer.produce(run.dst, key=m.key(), value=m.value().upper(), partition=m.partition())
                producer.flush(10)
                if stop_here("mid_produce"):
                    return
                for m in (m for m in msgs if m not in firsts):
                    producer.produce(run.dst, key=m.key(), value=m.value().upper(), partition=m.partition())
                producer.flush(10)
                if stop_here("after_produce"):
                    producer.flush(10)
                    return
                producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                     consumer.consumer_group_metadata())
                if stop_here("before_commit"):
                    return
                started = time.monotonic()
                producer.commit_transaction(30)
                with run.lock:
                    run.commits.append((n, epoch, producer._manager.producer_epoch, started))
                commits_done += 1
                if stop_here("after_commit"):
                    return
            except ProducerFencedError as e:
                run.fenced_errors[n] = e
                return                     # fatal: the only thing left to do is to close
            except RiverlogError:
                # Anything else: abort and carry on from the last committed offsets.
                try:
                    producer.abort_transaction(30)
                except ProducerFencedError as e:
                    run.fenced_errors[n] = e
                    return
                rewind()
    finally:
        run.stopped[n].set()
        if what != "kill":
            consumer.close()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_instances_killed_and_paused_at_random_write_each_record_once_and_zombies_never_commit(broker, topic_name,
                                                                                                seed):
    """A failing run prints its seed and plans; ``-k 'killed_and_paused and <seed>'`` replays the
    plans (thread timing still varies)."""
    rng = random.Random(seed)
    src, dst = f"{topic_name}-in", f"{topic_name}-out"
    make_topics(broker.bootstrap, src, dst)
    values = [b"record-%04d" % i for i in range(INPUT_RECORDS)]
    with Producer({"bootstrap.servers": broker.bootstrap}) as p:
        for i, v in enumerate(values):
            p.produce(src, value=v, partition=i % 2)
        assert p.flush(30) == 0
    run = _Run(broker.bootstrap, src, dst, seed)
    points = ["before_begin", "mid_produce", "mid_produce", "after_produce", "before_commit", "after_commit"]
    threads: dict[int, threading.Thread] = {}
    n = 0
    # read_uncommitted: the watcher reads progress while an instance's transaction (offsets pending
    # in it, unstable to a read_committed consumer) is open, or held open by a paused zombie
    watcher = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": run.group,
                        "isolation.level": "read_uncommitted"})
    parts = [TopicPartition(src, 0), TopicPartition(src, 1)]
    try:
        while sum(max(tp.offset, 0) for tp in watcher.committed(parts, timeout=30)) < INPUT_RECORDS:
            n += 1
            assert n <= 14, "the instances made no progress"
            plan = ("none", 0, "") if n >= 10 else (rng.choice(["kill", "pause", "pause"]), rng.randint(0, 2),
                                                    rng.choice(points))
            threads[n] = threading.Thread(target=_instance, args=(run, n, plan), name=f"instance-{n}",
                                          daemon=True)
            threads[n].start()
            run.plans[n] = plan
            assert run.stopped[n].wait(60), f"instance {n} ({plan}) neither stopped nor paused"
            # The zombies it resumed run to their end before a newer instance fences them again.
            for i in sorted(run.paused):
                if i != n and run.resume[i].is_set():
                    threads[i].join(60)
    finally:
        for i in run.paused:
            run.resume[i].set()
        for t in threads.values():
            t.join(60)
        watcher.close()
    assert not any(t.is_alive() for t in threads.values())
    print(run.summary())
    resumed = [i for i in run.paused if i in run.fenced_at]
    assert resumed, f"no zombie was resumed after being fenced: the test no longer exercises fencing; {run.summary()}"

    # No fenced instance committed: every commit began before its instance was fenced, under the
    # epoch the coordinator gave that instance.
    for instance, epoch, epoch_at_commit, started in run.commits:
        assert epoch_at_commit == epoch, f"instance {instance} committed with epoch {epoch_at_commit}, not {epoch}"
        assert started < run.fenced_at.get(instance, float("inf")), \
            f"instance {instance} committed after instance(s) {sorted(run.fenced_at)} were fenced"
    assert len({e for _, e, _, _ in run.commits}) == len({i for i, _, _, _ in run.commits})
    for instance in run.fenced_errors:
        assert instance in run.fenced_at, f"instance {instance} was told it is fenced before any successor started"
    # Exactly once: every input record, transformed, once in read_committed output.
    committed = read(broker.bootstrap, dst, "read_committed")
    assert collections.Counter(committed) == collections.Counter(v.upper() for v in values)
    for obj in run.leftovers:
        try:
            obj.close(1) if isinstance(obj, Producer) else obj.close()
        except Exception:  # noqa: BLE001 - killed instances' clients
            pass


# ------------------------------------------------------------------------------------------
def test_an_idempotent_producer_s_new_epoch_after_unknown_producer_id_comes_from_the_broker(broker_factory,
                                                                                              topic_name):
    node = broker_factory({"producer.id.expiration.ms": 1500, "producer.id.expiration.check.interval.ms": 100})
    make_topics(node.bootstrap, topic_name, partitions=1)
    tp = TopicPartition(topic_name, 0)
    failed = []
    producer = Producer({"bootstrap.servers": node.bootstrap, "on_delivery": lambda err, msg: err and failed.append(err)})
    calls = []    # (request's producer id and epoch, or None; answer)
    call_any = producer.cluster.call_any

    def recording(method, request, *args, **kwargs):
        reply = call_any(method, request, *args, **kwargs)
        if method == "InitProducerId":
            calls.append((_asked(request), (reply.producer_id, reply.producer_epoch)))
        return reply

    producer.cluster.call_any = recording
    with AdminClient({"bootstrap.servers": node.bootstrap}) as admin:
        for i in range(3):
            producer.produce(topic_name, value=b"%d" % i)
        assert producer.flush(30) == 0
        [before] = admin.describe_producers([tp])[tp].result(30).active_producers
        wait_until(lambda: not admin.describe_producers([tp])[tp].result(30).active_producers, 30, 0.1,
                   "the idle producer forgotten")
        for i in range(3, 6):
            producer.produce(topic_name, value=b"%d" % i)  # sequence 3 is unknown: UnknownProducerId
        assert producer.flush(30) == 0
        [after] = admin.describe_producers([tp])[tp].result(30).active_producers
    producer.close()
    assert failed == []
    pid = before.producer_id
    # The first call got an id; after UnknownProducerId the producer sent its id and epoch and
    # took the broker's answer: the partition holds exactly the epoch the broker handed out.
    assert calls == [(None, (pid, 0)), ((pid, 0), (pid, 1))]
    assert (after.producer_id, after.producer_epoch, after.last_sequence) == (pid, 1, 2)
    assert read(node.bootstrap, topic_name, "read_uncommitted", partitions=1, settle=0.5) == \
        [b"%d" % i for i in range(6)]


def _asked(request):
    """The producer id and epoch an InitProducerId request carries, or None."""
    try:
        return (request.producer_id, request.producer_epoch) if request.HasField("producer_id") else None
    except ValueError:  # a protocol without the fields
        return None
