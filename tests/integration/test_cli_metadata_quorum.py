"""``riverlog metadata-quorum describe`` prints what kafka-metadata-quorum.sh prints, for the lines
brokers can answer, and takes its options."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from broker.cli import main
from broker.cli.metadata_quorum import status_lines

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_status_lines_have_kafkas_labels_and_replica_lists():
    assert status_lines("c-1", 2, [3, 1], [4]) == [
        "ClusterId:              c-1",
        "LeaderId:               2",
        'CurrentVoters:          [{"id": 1, "directoryId": null}, {"id": 3, "directoryId": null}]',
        'CurrentObservers:       [{"id": 4, "directoryId": null}]']
    assert status_lines("c-1", -1, [], [])[-1] == "CurrentObservers:       []"


def test_describe_status_of_a_running_node(shared_broker):
    def run(*args):
        return CliRunner().invoke(main, ["metadata-quorum", "--bootstrap-server", shared_broker.bootstrap,
                                         "describe", *args])
    status = run("--status")
    assert status.exit_code == 0, status.output
    fields = dict(line.split(":", 1) for line in status.stdout.splitlines())
    assert list(fields) == ["ClusterId", "LeaderId", "CurrentVoters", "CurrentObservers"], fields
    leader = int(fields["LeaderId"])
    assert fields["CurrentVoters"].strip() == f'[{{"id": {leader}, "directoryId": null}}]', fields
    assert fields["CurrentObservers"].strip() == "[]", fields
    for args, code, why in ((("--status", "--replication"), 2, "Only one of --status or --replication"),
                            ((), 2, "One of --status or --replication must be specified"),
                            (("--replication",), 1, "do not report")):
        res = run(*args)
        assert res.exit_code == code and why in res.stderr, (args, res.output)
