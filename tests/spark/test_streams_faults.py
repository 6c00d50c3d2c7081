"""A Streams application killed with SIGKILL at each commit point of its exactly-once write, then
restarted with its checkpoint or without it (from the broker alone), and restarted from changelogs
the cleaner has compacted: its committed output and changelogs always equal the reference
interpreter's output (through Kafka's record cache: each batch's latest update per key) and
stores for the whole input — nothing twice, nothing missing. The same holds where rows are
combined with Arrow before a task (a windowed count per window, a table per key, a count per key).

A life that is killed runs in its own process (``streams_app_process.py``, its own SparkSession),
started during the life before it and waiting for that life's end before it touches anything; one
that is not runs in the test's session (a cold JVM's start is most of a short life). The
crash is :mod:`spark_sink.crash_points` (``RIVERLOG_CRASH_AT=<point>:<batch>``), which kills the
whole application (driver, JVM, Python workers) at that point of that batch."""
from __future__ import annotations

import shutil
import time

import pytest

from broker.client import AdminClient, Consumer, NewTopic, Producer, TopicPartition
from streams.serdes import Serdes
from streams.spark_task import meta_changelog
from streams.testing import TopologyTestDriver
from streams.topology import changelog_topic
from tests.conftest import BrokerProcess, wait_until
from tests.integration.test_retention_compaction import active_base, cleaned_up_to_the_active_segment
from tests.spark import streams_app_process as app_process
from tests.spark.child_process import Life, process_available, start_life
from tests.spark.streams_app_process import APP, ORDER, combined_topology, topology
from tests.streams.test_record_cache import is_subsequence

pytestmark = [pytest.mark.spark, pytest.mark.integration, pytest.mark.slow]

BASE = 1_700_000_000_000  # a timestamp of 0 means "now" to a producer
SCRIPT = app_process.__file__
STORES = ("per-user", "per-key-window")


@pytest.fixture
def broker(tmp_path):
    """A broker of the test's own (the application's id and internal topics are fixed), whose
    cleaner looks for dirty logs every 100 ms."""
    b = BrokerProcess(str(tmp_path / "broker"), {"group.min.session.timeout.ms": 300, "log.cleaner.backoff.ms": 100,
                                                 "log.retention.check.interval.ms": 100}).start()
    yield b
    b.kill9()


# ------------------------------------------------------------------------------ helpers (as test_streams_app's)
def history(n: int):
    users = ["ann", "bob", "cy"]
    return [(f"k{i % 4}", {"user": users[i % 3], "amount": float(50 + (i * 37) % 120)}, BASE + 1_000 * i)
            for i in range(n)]


def make_topics(servers: str, names, **config) -> None:
    with AdminClient({"bootstrap.servers": servers}) as admin:
        for name, f in admin.create_topics([NewTopic(n, 1, 1, dict(config)) for n in names]).items():
            f.result(30)


def produce(servers, topic, records):
    key, value = Serdes.String(), Serdes.Json(ORDER)
    with Producer({"bootstrap.servers": servers, "linger.ms": 0}) as p:
        for k, v, ts in records:
            p.produce(topic, key=key.serialize(k), value=value.serialize(v), timestamp=ts, partition=0)
        assert p.flush(30) == 0


def read_committed(servers, topic):
    """(key, value, timestamp, offset) of every committed record of partition 0, in offset order."""
    c = Consumer({"bootstrap.servers": servers, "group.id": f"check-{topic}", "enable.auto.commit": False,
                  "isolation.level": "read_committed", "auto.offset.reset": "earliest"})
    out = []
    try:
        low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=30)
        if high > low:
            c.assign([TopicPartition(topic, 0, low)])
            last_progress = time.monotonic()   # a quiet poll under load is not the end: read up to ``high``
            while c.position([TopicPartition(topic, 0)])[0].offset < high:
                msgs = c.consume(500, timeout=1)
                if msgs:
                    last_progress = time.monotonic()
                elif time.monotonic() - last_progress > 10:
                    break   # the last stable offset stays below ``high``: an open transaction
                out.extend((m.key(), m.value(), m.timestamp()[1], m.offset()) for m in msgs if not m.error())
    finally:
        c.close()
    return out


def decoded(servers, topic):
    s, l = Serdes.String(), Serdes.Long()
    return [(s.deserialize(k), l.deserialize(v), ts) for k, v, ts, _ in read_committed(servers, topic)]


def by_key(rows):
    out: dict = {}
    for k, v, ts in rows:
        out.setdefault(k, []).append((v, ts))
    return out


def oracle(tp, sources, records):
    """The driver after ``records`` piped into each of ``sources`` (one source, then the next)."""
    d = TopologyTestDriver(tp, {"application.id": "oracle"})
    for source in sources:
        i = d.createInputTopic(source, Serdes.String(), Serdes.Json(ORDER))
        for k, v, ts in records:
            i.pipeInput(k, v, ts)
    return d


# ------------------------------------------------------------------------------ the application's process
class App:
    """The application's topics and state directory, and its lives (a killed one in a process of its own)."""

    def __init__(self, servers: str, tmp_path, name: str, combined: bool = False):
        """``combined``: :func:`combined_topology`, its per-user count fed by a table of its own topic."""
        self.servers, self.state = servers, str(tmp_path / "state")
        self.source, self.out, self.wout = f"{name}-orders", f"{name}-per-user", f"{name}-windows"
        self.table_source = f"{name}-latest-orders" if combined else ""
        self.tp = (combined_topology(self.source, self.out, self.wout, self.table_source) if combined
                   else topology(self.source, self.out, self.wout))
        self.log_dir = tmp_path
        self.lives = 0

    @property
    def sources(self) -> list[str]:
        return [t for t in (self.source, self.table_source) if t]

    def changelogs(self) -> list[str]:
        subs = [s for s in self.tp.subtopologies if s.stateful]
        return ([changelog_topic(APP, s.name) for sub in subs for s in sub.stores]
                + [meta_changelog(APP, s.id) for s in subs])

    def run(self, spark) -> None:
        """A life that is not killed: process everything available in ``spark``, then close."""
        self.lives += 1
        process_available(spark, self.tp, app_process.config(self.servers, self.state))

    def start(self, crash: str) -> Life:
        """A life that dies with SIGKILL at ``crash``, in a process of its own started now (it
        builds its SparkSession) and let go by its ``.run()``."""
        self.lives += 1
        return start_life([SCRIPT, self.servers, self.state, self.source, self.out, self.wout, self.table_source],
                          self.log_dir / f"life-{self.lives}.log", crash, f"life {self.lives}")

    def lose_checkpoint(self) -> None:
        shutil.rmtree(self.state)

    def assert_equals_the_interpreter(self, records) -> None:
        """Committed output that the interpreter's for ``records`` allows, exactly once: through
        the record cache, per key a subsequence of the driver's updates (which commits per record)
        ending on its last — a record written twice or a final update lost breaks it — and each
        store's committed changelog (latest value per key) equal to the interpreter's store.

        The per-user count of the combined topology counts a table's rows, and its cached table
        forwards a batch's changes in order of each key's last write (Kafka's record cache), so a
        user's count may pass through values the driver, in record order, never shows (a user a key
        left before another key joined it at 0): there its last value per user only, which a
        change applied twice or lost would break, as it would the stores."""
        from streams.app import StreamsApp
        d = oracle(self.tp, self.sources, records)
        for topic in (self.out, self.wout):
            want = by_key((r.key, r.value, r.timestamp) for r in
                          d.createOutputTopic(topic, Serdes.String(), Serdes.Long()).readRecordsToList())
            got = by_key(decoded(self.servers, topic))
            if self.table_source and topic == self.out:
                ended = {k: us[-1][0] for k, us in got.items()}
                assert ended == {k: us[-1][0] for k, us in want.items() if us[-1][0] or k in ended} and ended, topic
                continue
            assert got.keys() == want.keys(), topic
            for key, updates in got.items():
                assert is_subsequence(updates, want[key]) and updates[-1] == want[key][-1], (topic, key)
        app = StreamsApp(self.tp, None, app_process.config(self.servers, self.state))
        per_user = sorted(app.store("per-user").all())
        assert per_user == sorted((k, v) for k, v in d.getKeyValueStore("per-user").all()
                                  if v or k in dict(per_user)) and per_user
        if self.table_source:
            assert sorted(app.store("latest-order").all(), key=repr) == \
                sorted(d.getKeyValueStore("latest-order").all(), key=repr)
        windows = sorted(app.store("per-key-window").all(), key=repr)
        assert windows == sorted(d.getWindowStore("per-key-window").all(), key=repr) and windows


# ------------------------------------------------------------------------------ tests
# Each commit point once, the checkpoint kept after three of the crashes and lost after one (a lost
# checkpoint starts batch ids again from 0), so each kind of restart follows: from the checkpoint
# (a batch not written, a batch decided and ended or not), and from the broker alone (a batch
# written, not decided). The third life starts from the broker and is killed in its first batch,
# after the batch's transactions ended and before Spark's commit log: a checkpoint that holds no
# finished batch is discarded, and the fourth life starts from the broker again (replayed from
# that checkpoint, its first batch would read from the source's initial offsets asked anew, into
# a store without the state restored from the changelogs).
LIVES = [("before_write", 1, "kept"), ("before_record", 2, "lost"), ("before_spark_commit", 0, "kept"),
         ("before_end", 1, "kept")]


@pytest.mark.timeout(2400)
def test_sigkill_at_each_commit_point_then_restart(spark, broker, tmp_path):
    """One life per commit point, each killed there and the next one its restart (each started
    during the one before, and let go once that one is dead); a last life finishes. A crash is at
    the given batch or the first later one that reaches its point; the four lives read at most five
    batches of each source (the fourth is killed in its second batch from offset 18), so seven
    batches of input leave each crash ahead of the last and two new batches to the last life. The
    application is the combined one: its windowed count is counted per window with Arrow, its table
    keeps each key's last record of a batch and its per-user count is counted per key before their
    tasks, so the steps that combine rows are killed at every point too."""
    from streams.app import StreamsApp
    app = App(broker.bootstrap, tmp_path, "crash", combined=True)
    crashes = [f"{point}:{batch}" for point, batch, _ in LIVES]
    ahead = app.start(crashes[0])
    try:
        described = str(StreamsApp(app.tp, None, app_process.config(broker.bootstrap, app.state)).describe())
        assert "counted per window with Arrow" in described and "each key's last record of a batch kept" in described
        assert "counted per key with Arrow" in described
        make_topics(broker.bootstrap, [*app.sources, app.out, app.wout], **{"retention.ms": "-1"})  # records from 2023
        records = history(7 * app_process.MAX_OFFSETS_PER_TRIGGER)
        for source in app.sources:
            produce(broker.bootstrap, source, records)
        for n, (_, _, checkpoint) in enumerate(LIVES):
            life, ahead = ahead, None
            life.wait_ready()
            ahead = app.start(crashes[n + 1]) if n + 1 < len(LIVES) else None
            life.run()
            if checkpoint == "lost":
                app.lose_checkpoint()
    finally:
        if ahead is not None:
            ahead.kill()
    app.run(spark)
    app.assert_equals_the_interpreter(records)


@pytest.mark.timeout(1200)
def test_a_lost_checkpoint_is_rebuilt_from_changelogs_the_cleaner_compacted(spark, broker, tmp_path):
    """The changelogs made beforehand to roll a segment per batch and clean at once; after a first
    life the cleaner has compacted every sealed segment (each key once); the checkpoint is lost and
    a second life rebuilds its state from what compaction left, then processes more input."""
    app = App(broker.bootstrap, tmp_path, "compacted")
    make_topics(broker.bootstrap, [app.source, app.out, app.wout], **{"retention.ms": "-1"})  # records from 2023
    make_topics(broker.bootstrap, app.changelogs(), **{"cleanup.policy": "compact", "segment.bytes": "100",
                                                      "min.cleanable.dirty.ratio": "0.01"})
    records = history(8 * app_process.MAX_OFFSETS_PER_TRIGGER)
    produce(broker.bootstrap, app.source, records[:30])
    app.run(spark)

    per_user = changelog_topic(APP, "per-user")
    for topic in (changelog_topic(APP, s) for s in STORES):
        wait_until(lambda: cleaned_up_to_the_active_segment(broker.data_dir, topic), 60, 0.1,
                   f"the cleaner to compact every sealed segment of {topic}")
    sealed = [r for r in read_committed(broker.bootstrap, per_user) if r[3] < active_base(broker.data_dir, per_user)]
    keys = [k for k, *_ in sealed]
    assert len(keys) == len(set(keys)) and keys, "compaction left an older entry of a key below the active segment"

    app.lose_checkpoint()
    produce(broker.bootstrap, app.source, records[30:])
    app.run(spark)
    app.assert_equals_the_interpreter(records)
