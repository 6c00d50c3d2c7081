"""The REST API's address as Kafka 3.0+ configures it: ``listeners`` (``http://host:port``; Kafka
removed ``rest.host.name`` and ``rest.port``, which Riverlog still reads when ``listeners`` is
not set). A Kafka ``worker.properties`` must not have its listener ignored."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from connect.errors import ConfigError
from connect.rest import RestServer
from connect.worker import Worker
from connect.worker_config import WorkerConfig

pytestmark = pytest.mark.unit

WORKER = {"bootstrap.servers": "127.0.0.1:9092", "group.id": "connect"}


def _server(props: dict) -> RestServer:
    return RestServer(SimpleNamespace(config=WorkerConfig.parse({**WORKER, **props})))


def test_listeners_set_where_the_rest_api_listens():
    server = _server({"listeners": "http://localhost:9000"})
    assert (server.host, server.port) == ("localhost", 9000)
    # an empty host is every interface, as Jetty binds it; listeners win over Kafka 2's keys
    server = _server({"listeners": "HTTP://:0", "rest.host.name": "10.0.0.1", "rest.port": "8090"})
    assert (server.host, server.port) == ("0.0.0.0", 0)
    assert _server({"listeners": "http://[::1]:8085"}).host == "::1"


def test_without_listeners_rest_host_name_and_rest_port_still_apply():
    assert (_server({}).host, _server({}).port) == ("127.0.0.1", 8083)
    server = _server({"rest.host.name": "10.0.0.1", "rest.port": "8090"})
    assert (server.host, server.port) == ("10.0.0.1", 8090)


def test_the_worker_id_takes_the_listeners_host_as_kafkas_advertised_url():
    config = WorkerConfig.parse({**WORKER, "listeners": "http://worker-7.example:9000"})
    assert Worker._advertised(SimpleNamespace(config=config)) == "worker-7.example:9000"
    assert Worker._advertised(SimpleNamespace(config=config), 9001) == "worker-7.example:9001"


@pytest.mark.parametrize("listeners, said", [
    ("localhost:9000", "Listener doesn't have the right format (protocol://hostname:port)."),
    ("ftp://localhost:9000", 'Listener protocol must be either "http" or "https".'),
    ("https://localhost:8443", "https"),
    ("http://a:8083,http://b:8084", "one"),
    ("http://a:70000", "65535"),
])
def test_a_listener_riverlog_cannot_serve_is_refused_naming_the_key(listeners, said):
    with pytest.raises(ConfigError) as refused:
        WorkerConfig.parse({**WORKER, "listeners": listeners})
    errors = refused.value.details["errors"]
    assert list(errors) == ["listeners"] and said in errors["listeners"][0], errors


def test_a_listener_on_every_interface_advertises_this_hosts_name():
    import socket
    config = WorkerConfig.parse({**WORKER, "listeners": "http://:9000"})
    assert Worker._advertised(SimpleNamespace(config=config)) == f"{socket.gethostname()}:9000"
