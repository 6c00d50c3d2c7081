"""Where a repartition topic may be purged to: the end of the newest batch Spark has committed
for the query that reads it, never a batch that is only planned."""
from __future__ import annotations

import json

import pytest

from streams.repartition_purge import purge_points

pytestmark = pytest.mark.unit


def _batch(ckpt, batch_id: int, offsets: dict, committed: bool) -> None:
    (ckpt / "offsets").mkdir(exist_ok=True)
    (ckpt / "offsets" / str(batch_id)).write_text("v1\n{}\n" + json.dumps(offsets) + "\n")
    if committed:
        (ckpt / "commits").mkdir(exist_ok=True)
        (ckpt / "commits" / str(batch_id)).write_text("v1\n{}\n")


def test_the_newest_committed_batch_sets_the_point_for_repartition_topics_only(tmp_path):
    assert purge_points(str(tmp_path), {"app-x-repartition"}) == {}           # no batch yet
    _batch(tmp_path, 0, {"app-x-repartition": {"0": 5, "1": 0}, "orders": {"0": 9}}, committed=True)
    _batch(tmp_path, 1, {"app-x-repartition": {"0": 8, "1": 3}, "orders": {"0": 12}}, committed=True)
    _batch(tmp_path, 2, {"app-x-repartition": {"0": 11, "1": 7}, "orders": {"0": 20}}, committed=False)
    # batch 2 is planned, not committed: a restart replays it from batch 1's end, so that stays
    assert purge_points(str(tmp_path), {"app-x-repartition"}) == {("app-x-repartition", 0): 8,
                                                                 ("app-x-repartition", 1): 3}
