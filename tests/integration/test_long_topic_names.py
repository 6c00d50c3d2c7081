"""Topics with the longest legal names (249 characters) can be deleted without harming the node,
and a failure removing a partition directory is reported while the node keeps serving."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from broker.client import AdminClient, Producer
from broker.metadata.image import MAX_TOPIC_NAME
from tests.conftest import wait_until
from tests.integration.test_produce_consume import create, read_all

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def _long_name(tag: str) -> str:
    return (tag + "-" + "x" * MAX_TOPIC_NAME)[:MAX_TOPIC_NAME]


def _delete(servers: str, name: str) -> None:
    with AdminClient({"bootstrap.servers": servers}) as admin:
        admin.delete_topics([name])[name].result(30)


def _topic_id(servers: str, name: str) -> str:
    with AdminClient({"bootstrap.servers": servers}) as admin:
        return admin.list_topics(name).topics[name].topic_id


def _serves(servers: str, name: str, count: int = 20) -> None:
    """``name`` (created here) gets a leader, takes ``count`` records and gives them back."""
    create(servers, name, 2)
    producer = Producer({"bootstrap.servers": servers, "acks": "all"})
    for i in range(count):
        producer.produce(name, value=b"v%d" % i, key=b"k%d" % i)
    assert producer.flush(30) == 0
    producer.close(5)
    got = read_all(servers, name, 2, count)
    assert sorted(m.value() for m in got) == sorted(b"v%d" % i for i in range(count))


def _partition_dirs(data_dir: str, prefix: str) -> list[str]:
    return [n for n in os.listdir(data_dir) if n.startswith(prefix[:40])]


def test_deleting_a_249_character_topic_leaves_the_node_working(broker_factory):
    broker = broker_factory()
    longest = _long_name("doomed")
    _serves(broker.bootstrap, longest)
    _delete(broker.bootstrap, longest)
    wait_until(lambda: not _partition_dirs(broker.data_dir, longest), 20, message="its directories to go")
    _serves(broker.bootstrap, "after-delete")

    # Restarts, after a crash and after a clean stop: ready, serving, nothing of the topic left.
    for stop in (broker.kill9, broker.stop):
        stop()
        broker.restart()
        _serves(broker.bootstrap, _long_name(f"after-{stop.__name__}"))
        assert not _partition_dirs(broker.data_dir, longest)
    second = _long_name("after-kill9")
    _delete(broker.bootstrap, second)
    broker.stop()
    broker.restart()
    _serves(broker.bootstrap, "after-second-delete")
    assert not _partition_dirs(broker.data_dir, second)
    assert "Traceback" not in "".join(broker.output)


@pytest.fixture
def immutable():
    """``immutable(path)``: make a directory unrenameable (``chattr +i``), undone afterwards."""
    made = []

    def make(path: str) -> None:
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", path]).returncode != 0:
            pytest.skip("chattr +i is not available here")
        made.append(path)

    yield make
    for path in made:
        if os.path.exists(path):
            subprocess.run(["chattr", "-i", path], check=True)


def _reported(broker, text: str) -> bool:
    return any("metadata-apply-error-count" in line and text in line for line in broker.output)


def test_a_partition_directory_that_cannot_be_removed_is_reported_and_later_topics_still_serve(
        broker_factory, immutable):
    broker = broker_factory()
    create(broker.bootstrap, "stuck", 1)
    stuck_dir = os.path.join(broker.data_dir, "stuck-0")
    immutable(stuck_dir)
    _delete(broker.bootstrap, "stuck")
    wait_until(lambda: _reported(broker, "stuck-0"), 20, message="the failed removal to be reported")
    assert any("remove_topic" in line for line in broker.output if "metadata-apply-error-count" in line)
    _serves(broker.bootstrap, "after-stuck")            # later records still apply

    # At start-up the removal is tried again; failing, it is reported and the node still serves.
    broker.stop()
    broker.output.clear()
    broker.restart()
    wait_until(lambda: _reported(broker, "stuck-0"), 20, message="the failed removal to be reported again")
    _serves(broker.bootstrap, "after-restart")
    subprocess.run(["chattr", "-i", stuck_dir], check=True)
    broker.stop()
    broker.restart()
    _serves(broker.bootstrap, "after-unblock")
    assert not os.path.exists(stuck_dir)
