"""Interactive queries over a slow link: a TCP proxy between the querying process and the broker
holds back the response chunk that carries the changelog's records. A fetch answered later than
one consume() wait must not end the partition (the store came back empty), and a read that makes
no progress for its whole timeout raises instead of answering with what it has."""
from __future__ import annotations

import socket
import threading
import time

import pytest
from click.testing import CliRunner

from broker.cli import main
from broker.client import AdminClient, NewTopic, Producer
from broker.errors import KafkaTimeoutError
from streams.interactive import read_store
from streams.state_codec import encode_key, encode_value
from streams.stores import StoreSpec
from tests.conftest import free_ports

pytestmark = pytest.mark.integration

TOPIC = "slow-prices-changelog"
MARKER = b"slow-key-"      # in every changelog key: the chunk of a fetch response holding records


class DelayingProxy:
    """Forwards 127.0.0.1:``port`` to the broker; a chunk from the broker that holds ``MARKER`` is
    sent ``delay`` seconds late (a fetch answered slowly, everything else on time)."""

    def __init__(self, port: int, target: int, delay: float):
        self.port, self.target, self.delay = port, target, delay
        self.sockets: list[socket.socket] = []
        self.listener = socket.create_server(("127.0.0.1", port))
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            self.sockets += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, 0.0), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, self.delay), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket, delay: float):
        try:
            while data := src.recv(65536):
                if delay and MARKER in data:
                    time.sleep(delay)        # the slow link itself, not a wait for a condition
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                s.close()

    def close(self):
        self.listener.close()
        for s in self.sockets:
            s.close()


@pytest.fixture
def slow_link(broker_factory):
    """``slow_link(delay)``: the bootstrap of a proxy delaying the records' chunks by ``delay`` s;
    the broker advertises the proxy, so every connection of a client bootstrapped through it goes
    through it."""
    proxies: list[DelayingProxy] = []

    def make(delay: float) -> str:
        proxy_port = free_ports(1)[0]
        broker = broker_factory({"advertised.listeners": f"127.0.0.1:{proxy_port}"})
        proxies.append(DelayingProxy(proxy_port, broker.port, delay))
        servers = f"127.0.0.1:{proxy_port}"
        with AdminClient({"bootstrap.servers": servers}) as admin:
            admin.create_topics([NewTopic(TOPIC, 1, 1, {"cleanup.policy": "compact"})])[TOPIC].result(30)
        with Producer({"bootstrap.servers": servers, "linger.ms": 1}) as p:
            for i in range(3):
                p.produce(TOPIC, key=encode_key(("k", f"slow-key-{i}")), value=encode_value((i, i)))
            assert p.flush(30) == 0
        return servers

    yield make
    for proxy in proxies:
        proxy.close()


def test_a_fetch_slower_than_one_consume_wait_still_gives_the_whole_store(slow_link):
    servers = slow_link(1.5)
    store = read_store({"bootstrap.servers": servers}, TOPIC, StoreSpec("prices", "keyValue"), timeout=30)
    assert store.all() == [(f"slow-key-{i}", i) for i in range(3)]


def test_no_progress_for_the_whole_timeout_raises_a_timeout_not_a_partial_store(slow_link):
    servers = slow_link(4.0)
    with pytest.raises(KafkaTimeoutError, match=r"no progress for 2 s at offset 0 of 3 .* give a longer timeout"):
        read_store({"bootstrap.servers": servers}, TOPIC, StoreSpec("prices", "keyValue"), timeout=2.0)
    got = CliRunner().invoke(main, ["streams", "query", "slow", "prices", "--all", "-b", servers, "--timeout", "2"])
    assert got.exit_code == 1 and "no progress for 2 s" in got.output, got.output
