"""``riverlog topics create|alter --replica-assignment`` as ``kafka-topics``: ``1:2,2:3`` lists
each partition's brokers; on alter it covers every partition and the added ones are placed."""
from __future__ import annotations

import pytest

from broker.client import AdminClient
from tests.integration.test_cli import describe, run_cli

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_create_and_alter_place_partitions_where_asked(shared_broker, topic_name):
    with AdminClient({"bootstrap.servers": shared_broker.bootstrap}) as admin:
        node = admin.describe_cluster().result(30).nodes[0].id

    def cli(*args, check=True):
        return run_cli(shared_broker.bootstrap, *args, check=check)

    cli("topics", "create", topic_name, "--replica-assignment", f"{node},{node}")
    head, parts = describe(cli, topic_name)
    assert head["PartitionCount"] == "2" and [p["Replicas"] for p in parts] == [str(node)] * 2
    cli("topics", "alter", topic_name, "--partitions", 3, "--replica-assignment", f"{node},{node},{node}")
    assert describe(cli, topic_name)[0]["PartitionCount"] == "3"

    unknown = cli("topics", "alter", topic_name, "--partitions", 4, "--replica-assignment",
                  f"{node},{node},{node},{node + 7}", check=False)
    assert unknown.returncode == 1 and "INVALID_REPLICA_ASSIGNMENT" in unknown.stderr
    assert f"includes broker {node + 7}, but no such broker is registered" in unknown.stderr

    twice = cli("topics", "create", topic_name + "-x", "--replica-assignment", f"{node}:{node}", check=False)
    assert twice.returncode == 2 and "Partition replica lists may not contain duplicate entries" in twice.stderr
    uneven = cli("topics", "create", topic_name + "-x", "--replica-assignment", f"{node},{node}:{node + 1}",
                 check=False)
    assert uneven.returncode == 2 and "Partition 1 has different replication factor" in uneven.stderr
    both = cli("topics", "create", topic_name + "-x", "--partitions", 2, "--replica-assignment", str(node),
               check=False)
    assert both.returncode == 2 and "cannot be used with --partitions" in both.stderr
