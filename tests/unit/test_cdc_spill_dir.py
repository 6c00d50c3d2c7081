"""``transaction.spill.dir`` is checked when the replication stream starts: a directory no file can
be made in would otherwise fail the query only when the first transaction past
``transaction.spill.threshold.bytes`` arrives, possibly hours into the stream."""
from __future__ import annotations

import os

import pytest

from broker.errors import InvalidConfigError
from spark_source.postgres.options import CdcOptions
from spark_source.postgres.replication import ReplicationStream

pytestmark = pytest.mark.unit


def _stream(spill_dir: str) -> ReplicationStream:
    # port 1: were the check not first, opening would try (and fail) to connect instead
    return ReplicationStream(CdcOptions.parse({"database.hostname": "127.0.0.1", "database.port": "1",
                                               "transaction.spill.dir": spill_dir}), 0)


def test_a_missing_spill_dir_fails_the_start_with_a_config_error(tmp_path):
    with pytest.raises(InvalidConfigError, match="transaction.spill.dir") as refused:
        _stream(str(tmp_path / "absent")).open(in_use_timeout_s=0)
    assert refused.value.details.get("config") == "transaction.spill.dir"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_a_read_only_spill_dir_fails_the_start_with_a_config_error(tmp_path):
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(InvalidConfigError, match="no file can be made"):
            _stream(str(tmp_path)).open(in_use_timeout_s=0)
    finally:
        tmp_path.chmod(0o700)
    assert os.listdir(tmp_path) == []
