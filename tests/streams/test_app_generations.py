"""A checkpoint left behind when the application ran from another ``state.dir`` since (it moved
to another machine and back): the broker's generations record that newer run, whose committed
offsets and changelogs are past this checkpoint, so the query starts from the broker instead of
resuming from it (Kafka restores a task's stale local state from its changelog, and its input
resumes at the committed offsets). A real broker, no Spark: ``_discard_unusable_checkpoint`` is the
decision ``StreamsApp._start`` makes before a query starts."""
from __future__ import annotations

import os

from broker.client import AdminClient, NewTopic
from streams.app import OWNER_FILE, StreamsApp
from streams.builder import StreamsBuilder
from streams.parameters import Consumed, Materialized
from streams.serdes import Serdes

S = Serdes.String()


def _app(bootstrap: str, state_dir) -> StreamsApp:
    b = StreamsBuilder()
    b.stream("clicks", Consumed.with_(S, S)).groupByKey().count(Materialized.as_("counts"))
    app = StreamsApp(b.build(), None, {"application.id": "moves", "bootstrap.servers": bootstrap,
                                       "state.dir": str(state_dir)})
    app._create_internal_topics()       # as a start does first (the generations topic included)
    return app


def _checkpoint_of(app: StreamsApp, sub, generation: int) -> str:
    """A stateful query's checkpoint with a finished batch, written under ``generation``."""
    ckpt = app._checkpoint(sub)
    for d in ("commits", "offsets", "state"):
        os.makedirs(os.path.join(ckpt, d), exist_ok=True)
    with open(os.path.join(ckpt, "commits", "0"), "w") as f:
        f.write("v1\n{}\n")
    with open(os.path.join(ckpt, OWNER_FILE), "w") as f:
        f.write(app._owner(sub, generation))
    return ckpt


def test_a_checkpoint_of_an_older_generation_than_the_broker_records_is_not_resumed(broker_factory, tmp_path):
    bootstrap = broker_factory().bootstrap
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        for f in admin.create_topics([NewTopic("clicks", 1, 1)]).values():
            f.result(30)
    host1 = _app(bootstrap, tmp_path / "host1")
    sub = host1.runnable()[0]
    ckpt = _checkpoint_of(host1, sub, host1._next_generation(sub))
    host1._discard_unusable_checkpoint(sub)
    assert os.path.exists(os.path.join(ckpt, OWNER_FILE)), "its own generation's checkpoint is resumed"
    host2 = _app(bootstrap, tmp_path / "host2")        # the application moved: it starts from the broker
    assert host2._next_generation(sub) == 2
    host1._discard_unusable_checkpoint(sub)            # and back: host1's checkpoint is behind the broker
    assert not os.path.exists(ckpt)


class _Query:
    def stop(self) -> None:
        pass


def _counted_reads(app: StreamsApp, monkeypatch) -> list[int]:
    """``app``'s reads of the generations topic (one consumer each), counted; ``_start`` stops
    after its checkpoint and generation decisions (``_claim``), which need no Spark."""
    reads = [0]
    read = app._generations

    def counted():
        reads[0] += 1
        return read()
    monkeypatch.setattr(app, "_generations", counted)
    monkeypatch.setattr(app, "_start", lambda sub: (app._claim(sub), _Query())[1])
    return reads


def _three_subtopologies(bootstrap: str, state_dir) -> StreamsApp:
    b = StreamsBuilder()
    for topic in ("a", "b", "c"):
        b.stream(topic, Consumed.with_(S, S)).groupByKey().count(Materialized.as_(f"counts-{topic}"))
    return StreamsApp(b.build(), None, {"application.id": "once", "bootstrap.servers": bootstrap,
                                        "state.dir": str(state_dir)})


def test_a_start_reads_the_generations_once_and_decides_as_a_read_per_check(broker_factory, tmp_path, monkeypatch):
    bootstrap = broker_factory().bootstrap
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        for f in admin.create_topics([NewTopic(t, 1, 1) for t in ("a", "b", "c")]).values():
            f.result(30)
    host1 = _three_subtopologies(bootstrap, tmp_path / "host1")
    reads = _counted_reads(host1, monkeypatch)
    host1._start_queries()                          # every sub-topology fresh: generation 1 each
    subs = host1._subs
    assert len(subs) == 3 and reads[0] == 1
    host1._stop_queries()
    host2 = _three_subtopologies(bootstrap, tmp_path / "host2")     # elsewhere: generation 2 each
    host2._create_internal_topics()
    for sub in subs:
        assert host2._next_generation(sub) == 2
    ckpts = [_checkpoint_of(host1, subs[0], 1), _checkpoint_of(host1, subs[1], 2)]
    reads[0] = 0
    host1._start_queries()      # sub 0's checkpoint superseded, sub 1's current, sub 2 fresh
    assert reads[0] == 1
    assert not os.path.exists(ckpts[0]) and os.path.exists(os.path.join(ckpts[1], OWNER_FILE))
    assert host1._generations() == {f"subtopology-{subs[0].id}": 3, f"subtopology-{subs[1].id}": 2,
                                    f"subtopology-{subs[2].id}": 3}
    reads[0] = 0
    host2._next_generation(subs[1])                 # another run records generation 3 of sub 1 ...
    host1._restart_query(1)                         # ... which a later start of its query reads anew
    assert reads[0] == 1 and not os.path.exists(ckpts[1])
    host1._stop_queries()
