"""``riverlog streams query`` against a real broker: a changelog written through Riverlog's state
codec (as a task's flush writes it, in transactions) is read back as the committed store only."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from broker.cli import main
from broker.client import AdminClient, NewTopic, Producer
from streams.state_codec import encode_key, encode_value

pytestmark = pytest.mark.integration

TOPIC = "shop-prices-changelog"


def _transaction(p: Producer, entries, commit: bool) -> None:
    p.begin_transaction()
    for partition, key, value in entries:
        p.produce(TOPIC, key=encode_key(("k", key)), value=None if value is None else encode_value(value),
                  partition=partition)
    assert p.flush(30) == 0
    p.commit_transaction(30) if commit else p.abort_transaction(30)


def test_query_prints_the_committed_store_by_key_range_and_all(broker_factory):
    broker = broker_factory()
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(TOPIC, 2, 1, {"cleanup.policy": "compact"})])[TOPIC].result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "shop-task-0", "linger.ms": 1})
    p.init_transactions(30)
    _transaction(p, [(0, "EUR", (1.08, 5)), (1, "USD", (1.0, 6)), (1, "GBP", (1.27, 7)),
                     (0, ("DE", 2), ({"rate": 3}, 8)),
                     (1, ("__list__", "FR", 3), ({"rate": 4}, 8))], commit=True)  # a Json-serde list key, as stored
    _transaction(p, [(1, "GBP", None)], commit=True)           # a tombstone leaves the store
    _transaction(p, [(0, "EUR", (9.99, 9))], commit=False)      # never committed: never shown
    p.close()

    def query(*args):
        return CliRunner().invoke(main, ["streams", "query", "shop", "prices", *args,
                                         "--bootstrap-server", broker.bootstrap])

    got = query("EUR")
    assert got.exit_code == 0, got.output
    assert [json.loads(line) for line in got.output.splitlines()] == [{"key": "EUR", "value": 1.08}]
    assert json.loads(query('["DE", 2]').output) == {"key": ["DE", 2], "value": {"rate": 3}}
    assert json.loads(query('["FR", 3]').output) == {"key": ["FR", 3], "value": {"rate": 4}}
    assert query("GBP").exit_code == 1 and query("GBP").output == ""
    ranged = [json.loads(line)["key"] for line in query("--range", "A", "F").output.splitlines()]
    assert ranged == ["EUR"]
    every = [json.loads(line) for line in query("--all").output.splitlines()]
    assert sorted(json.dumps(e["key"]) for e in every) == ['"EUR"', '"USD"', '["DE", 2]', '["FR", 3]']
    missing = CliRunner().invoke(main, ["streams", "query", "shop", "nope", "k", "-b", broker.bootstrap])
    assert missing.exit_code == 1 and "no changelog topic 'shop-nope-changelog'" in missing.output
