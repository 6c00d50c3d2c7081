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
