"""``riverlog configs`` is kafka-configs.sh (``ConfigCommand``): its options, its describe lines and
its messages, against a real broker process."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from broker.cli import main
from tests.integration.test_cli import create_topic, lines

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def cli(shared_broker):
    """``cli(*args)`` runs ``riverlog -b <shared broker> *args`` in this process (fast)."""
    def run(*args, check=True):
        result = CliRunner().invoke(main, ["-b", shared_broker.bootstrap, *map(str, args)])
        result.returncode = result.exit_code
        assert not check or result.exit_code == 0, (result.output, result.exception)
        return result
    return run


def test_configs_describe_and_alter_as_kafka_configs(cli, shared_broker, topic_name):
    create_topic(shared_broker.bootstrap, topic_name, **{"segment.ms": "60000"})
    altered = cli("configs", "--bootstrap-server", shared_broker.bootstrap, "--entity-type", "topics",
                  "--entity-name", topic_name, "--alter", "--add-config", "retention.ms=1000",
                  "--delete-config", "segment.ms")
    assert lines(altered.stdout) == [f"Completed updating config for topic {topic_name}."], altered.stdout

    described = lines(cli("configs", "--topic", topic_name, "--describe").stdout)   # Kafka's short form
    assert described[0] == f"Dynamic configs for topic {topic_name} are:", described
    assert len(described) == 2 and described[1].startswith(   # only the override; its synonyms, most specific first
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, "), described
    assert described[1].endswith(", DEFAULT_CONFIG:log.retention.hours=168}"), described

    every = lines(cli("configs", "--entity-type", "brokers", "--describe", "--all").stdout)
    heads = [line for line in every if not line.startswith("  ")]
    assert heads[0].startswith("All configs for broker ") and heads[-1] == \
        "Default configs for brokers in the cluster are:", heads
    keys = [line.split("=", 1)[0].strip() for line in every[1:every.index(heads[1])]]
    assert "log.retention.ms" in keys and keys == sorted(keys), keys

    refused = cli("configs", "--topic", topic_name, "--alter", "--delete-config", "segment.ms", check=False)
    assert refused.returncode == 1 and "Invalid config(s): segment.ms" in refused.stderr, refused.stderr
    usage = cli("configs", "--topic", topic_name, "--alter", check=False)
    assert usage.returncode == 2 and "At least one of --add-config" in usage.stderr, usage.stderr
