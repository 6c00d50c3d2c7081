"""KIP-158 topic creation for PostgresCdcSource: the topics a Debezium config writes are created
with their ``topic.creation.*`` group's settings before the first change event, as Kafka's
``AbstractWorkerSourceTask.maybeCreateTopic`` creates each topic as its first record is sent
(Debezium's docs: "Customization of Kafka Connect automatic topic creation" recommend
``table.include.list`` patterns with ``topic.creation.default.*``). Real PostgreSQL, one broker."""
from __future__ import annotations

import pytest

import connect.plugins  # noqa: F401  (registers the built-in plugins)
from connect.config import parse_connector_config

_DEFAULTS = {"topic.creation.default.replication.factor": "1", "topic.creation.default.partitions": "3"}


def _source(pg_db, **extra):
    from connect.connector import ConnectorContext
    from connect.postgres_cdc_source import PostgresCdcSource
    config = parse_connector_config({
        "name": "shop-cdc", "connector.class": "PostgresCdcSource", **pg_db.server.options(),
        "database.dbname": pg_db.dbname, "topic.prefix": "shop", **extra})
    return config, PostgresCdcSource(config, ConnectorContext(None, "127.0.0.1:9092"))


def _tables(pg_db):
    pg_db.execute("CREATE SCHEMA inventory")
    pg_db.execute("CREATE TABLE public.customers (id int PRIMARY KEY)")
    pg_db.execute("CREATE TABLE public.orders (id int PRIMARY KEY)")
    pg_db.execute("CREATE TABLE public.order_lines (id int PRIMARY KEY)")
    pg_db.execute('CREATE TABLE public."Mixed" (id int PRIMARY KEY)')
    pg_db.execute("CREATE TABLE inventory.items (id int PRIMARY KEY)")
    pg_db.execute("CREATE TABLE public.events (id int, at date) PARTITION BY RANGE (at)")
    pg_db.execute("CREATE TABLE public.events_2024 PARTITION OF public.events "
                  "FOR VALUES FROM ('2024-01-01') TO ('2025-01-01')")


@pytest.mark.integration
def test_the_topics_of_the_tables_a_pattern_captures_are_named_from_the_catalog(pg_db):
    _tables(pg_db)
    # no list: every user table (partitions and their parent too, as the source captures them)
    assert _source(pg_db)[1].output_topics() == [
        "shop.inventory.items", "shop.public.Mixed", "shop.public.customers", "shop.public.events",
        "shop.public.events_2024", "shop.public.order_lines", "shop.public.orders"]
    # patterns matched as the source matches them: whole name, ignoring case, schema lists too
    _, source = _source(pg_db, **{"table.include.list": "public\\.order.*,.*\\.mixed,inventory.items",
                                  "schema.exclude.list": "inventory"})
    assert source.output_topics() == ["shop.public.Mixed", "shop.public.order_lines", "shop.public.orders"]
    _, source = _source(pg_db, **{"table.exclude.list": "public\\.events.*,inventory\\..*",
                                  "provide.transaction.metadata": "true", "topic.transaction": "tx"})
    assert source.output_topics() == ["shop.public.Mixed", "shop.public.customers", "shop.public.order_lines",
                                      "shop.public.orders", "shop.tx"]


@pytest.mark.integration
def test_the_worker_creates_each_captured_tables_topic_with_its_groups_settings(pg_db, shared_broker, topic_name):
    from broker.client import AdminClient

    from connect.config import with_worker_client_defaults
    from connect.worker import Worker
    from connect.worker_connector import _Connector
    _tables(pg_db)
    prefix = topic_name.replace("-", "_")
    bootstrap = shared_broker.bootstrap
    worker = Worker(None, {"bootstrap.servers": bootstrap, "group.id": "g"})
    c = _Connector("shop-cdc")
    config, _ = _source(pg_db, **_DEFAULTS, **{
        "topic.prefix": prefix, "table.include.list": "public\\.order.*",
        "topic.creation.groups": "lines", "topic.creation.lines.include": ".*lines",
        "topic.creation.lines.partitions": "2",
        # Debezium's reroute of a table topic: created under the name its records carry
        "transforms": "route", "transforms.route.type": "RegexRouter",
        "transforms.route.regex": "(.*)\\.public\\.(.*)", "transforms.route.replacement": "$1.$2"})
    c.config = with_worker_client_defaults(config, worker.config)
    from connect.connector import ConnectorContext
    from connect.postgres_cdc_source import PostgresCdcSource
    c.plugin = PostgresCdcSource(c.config, ConnectorContext(None, bootstrap))
    worker._create_topics(c)
    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        topics = admin.list_topics(timeout=30).topics
    assert len(topics[f"{prefix}.orders"].partitions) == 3
    assert len(topics[f"{prefix}.order_lines"].partitions) == 2
    assert f"{prefix}.public.orders" not in topics and f"{prefix}.customers" not in topics
