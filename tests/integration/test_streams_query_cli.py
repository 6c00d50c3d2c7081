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


def _changelog(broker, app: str, store: str, build, pipe) -> None:
    """``store``'s changelog as a running application writes it: the driver's store changes, in
    one committed transaction."""
    from streams.builder import StreamsBuilder
    from streams.testing import TopologyTestDriver
    from streams.topology import changelog_topic
    b = StreamsBuilder()
    build(b)
    d = TopologyTestDriver(b.build(), {"application.id": app})
    pipe(d)
    topic = changelog_topic(app, store)
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, {"cleanup.policy": "compact"})])[topic].result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"{app}-{store}", "linger.ms": 1})
    p.init_transactions(30)
    p.begin_transaction()
    for s in d._interp.stores(store):
        for key, value in s.backing.changes:
            p.produce(topic, key=encode_key(key), value=None if value is None else encode_value(value), partition=0)
    assert p.flush(30) == 0
    p.commit_transaction(30)
    p.close()


def _query(broker, app: str, *args) -> list[dict]:
    got = CliRunner().invoke(main, ["streams", "query", app, *args, "--bootstrap-server", broker.bootstrap])
    assert got.exit_code == 0, got.output
    return [json.loads(line) for line in got.output.splitlines()]


def test_query_prints_window_ends_from_the_size_the_store_recorded(broker_factory):
    """Window rows end at start + size: the CLI had no size and printed end == start."""
    from streams.parameters import Consumed, Materialized
    from streams.serdes import Serdes
    from streams.windows import TimeWindows
    S = Serdes.String()
    broker = broker_factory()

    def windows(b):
        b.stream("in", Consumed.with_(S, S)).groupByKey().windowedBy(TimeWindows.ofSizeAndGrace(10, 1000)).count(
            materialized=Materialized.as_("clicks"))

    def click(d):
        for k, ts in [("a", 1), ("a", 3), ("b", 12)]:
            d.createInputTopic("in", S, S).pipeInput(k, "x", ts)

    _changelog(broker, "web", "clicks", windows, click)
    assert _query(broker, "web", "clicks", "--all") == [{"key": "a", "start": 0, "end": 10, "value": 2},
                                                       {"key": "b", "start": 10, "end": 20, "value": 1}]
    assert _query(broker, "web", "clicks", "a") == [{"key": "a", "start": 0, "end": 10, "value": 2}]


def test_query_range_reads_its_bounds_as_key_is_read(broker_factory):
    """--range FROM TO passed the strings: no numeric key was ever in range. The bounds are read
    as KEY is: as strings, then, when no key is in that range, as JSON."""
    from streams.parameters import Consumed, Materialized
    from streams.serdes import Serdes
    S, L = Serdes.String(), Serdes.Long()
    broker = broker_factory()

    def table(b):
        b.stream("in", Consumed.with_(L, S)).toTable(materialized=Materialized.as_("ids"))

    def ids(d):
        for k in [5, -1, 0, 3, 12]:
            d.createInputTopic("in", L, S).pipeInput(k, f"v{k}", 1)

    _changelog(broker, "web", "ids", table, ids)
    assert [e["key"] for e in _query(broker, "web", "ids", "--range", "0", "5")] == [0, 3, 5]
    assert [e["key"] for e in _query(broker, "web", "ids", "--range", "-1", "3")] == [-1, 0, 3]


def test_a_window_changelog_without_a_recorded_size_prints_no_end(broker_factory):
    """A window changelog written before stores recorded their size: the end is not known, so
    it is left out rather than printed as the start."""
    broker = broker_factory()
    topic = "old-clicks-changelog"
    with AdminClient({"bootstrap.servers": broker.bootstrap}) as admin:
        admin.create_topics([NewTopic(topic, 1, 1, {"cleanup.policy": "compact"})])[topic].result(30)
    with Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1}) as p:
        p.produce(topic, key=encode_key(("w", "a", 0)), value=encode_value((2, 3)))
        p.produce(topic, key=encode_key(("i", "a")), value=encode_value((0,)))
        assert p.flush(30) == 0
    got = CliRunner().invoke(main, ["streams", "query", "old", "clicks", "--all", "-b", broker.bootstrap])
    assert got.exit_code == 0, got.output
    assert [json.loads(line) for line in got.output.splitlines()] == [{"key": "a", "start": 0, "value": 2}]
