"""Kafka Connect REST answers pinned by Kafka's ConnectorsResourceTest, over real HTTP against a
real worker (one SparkSession, one broker process). Connectors are created STOPPED (KIP-980), so
no Spark query runs."""
from __future__ import annotations

from urllib.parse import quote

import httpx
import pytest

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def env(spark, spark_broker, tmp_path_factory):
    from connect.rest import RestServer
    from connect.worker import Worker
    root = tmp_path_factory.mktemp("connect-rest-upstream")
    worker = Worker(spark, {"bootstrap.servers": spark_broker.bootstrap, "group.id": "rest-upstream",
                            "rest.port": 0, "state.dir": str(root / "state")}).start()
    server = RestServer(worker, "127.0.0.1", 0).start()
    client = httpx.Client(base_url=server.url, timeout=120)
    yield {"root": root, "http": client}
    client.close()
    server.stop()
    worker.close()


def _config(env) -> dict:
    return {"connector.class": "FileStreamSource", "file": str(env["root"] / "in.txt"), "topic": "upstream"}


def test_a_new_connectors_name_is_trimmed_as_javas_string_trim(env):
    """ConnectorsResource.createConnector trims the name with String.trim(): every character up to
    U+0020 goes (testCreateConnectorNameAllWhitespaces: ``"   \\t\\n  \\b"`` is the empty name,
    which validation refuses), and nothing else does: a no-break space stays in the name."""
    http = env["http"]
    refused = http.post("/connectors", json={"name": "   \t\n  \b", "config": _config(env)})
    assert refused.status_code == 400, refused.text
    assert "Invalid value  for configuration name: String may not be empty" in refused.json()["message"]
    name = "\u00a0nbsp\u00a0"
    created = http.post("/connectors", json={"name": f" \x08{name}\x1f ", "config": _config(env),
                                             "initial_state": "STOPPED"})
    assert created.status_code == 201, created.text
    assert created.json()["name"] == name and name in http.get("/connectors").json()
    assert created.headers["Location"].endswith("/connectors/" + quote(name, safe=""))
    assert http.delete("/connectors/" + quote(name, safe="")).status_code == 204
