"""``riverlog groups describe`` prints what Kafka's ConsumerGroupCommand prints: columns, padding,
row order and the notices of a group that is not Stable."""
from __future__ import annotations

import pytest

from broker.cli.group_description import (Member, list_lines, members_lines, offset_rows, offsets_lines, state_lines,
                                          state_notice)

pytestmark = pytest.mark.unit


def test_offsets_view_has_kafkas_columns_and_row_order():
    busy = Member("m-2", "/10.0.0.2", "c2", [("t", 1), ("t", 0)])
    idle = Member("m-1", "/10.0.0.1", "c1", [])
    rows = offset_rows("g", [idle, busy], {("t", 0): 3, ("t", 2): 9, ("u", 0): 1}, {("t", 0): 5, ("t", 1): 7, ("t", 2): 9})
    assert rows == [["g", "t", "0", "3", "5", "2", "m-2", "/10.0.0.2", "c2"],     # most partitions first
                    ["g", "t", "1", "-", "7", "-", "m-2", "/10.0.0.2", "c2"],     # nothing committed: no lag
                    ["g", "-", "-", "-", "-", "-", "m-1", "/10.0.0.1", "c1"],     # a member owning nothing
                    ["g", "t", "2", "9", "9", "0", "-", "-", "-"],                # committed, owned by nobody
                    ["g", "u", "0", "1", "-", "-", "-", "-", "-"]]
    lines = offsets_lines(rows[:1])
    assert lines[0] == ""
    assert lines[1] == ("GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  LAG             "
                        "CONSUMER-ID     HOST            CLIENT-ID")
    assert lines[2] == ("g               t               0          3               5               2               "
                        "m-2             /10.0.0.2       c2")
    assert offsets_lines([]) == []


def test_members_view_with_and_without_instance_ids_and_verbose():
    members = [Member("m-1", "/h", "c", [("b", 1), ("a", 2), ("a", 0)]), Member("m-2", "/h", "c", [])]
    plain = members_lines("g", members, verbose=False)
    assert [line.split() for line in plain] == [[], ["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"],
                                                ["g", "m-1", "/h", "c", "3"], ["g", "m-2", "/h", "c", "0"]]
    assert plain[1].endswith("#PARTITIONS     ")                # Kafka's "%-15s " keeps its padding
    verbose = members_lines("g", members, verbose=True)
    assert verbose[1].split()[-1] == "ASSIGNMENT"
    assert verbose[2].endswith(" a(0,2), b(1)") and verbose[3].endswith(" -"), verbose
    static = members_lines("g", [Member("m-1", "/h", "c", [], "pod-3")], verbose=False)
    assert static[1].split() == ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    assert static[2].split() == ["g", "m-1", "pod-3", "/h", "c", "0"]


def test_state_view_and_notices():
    lines = state_lines("g", "127.0.0.1:9092  (1)", "range", "Stable", 2)
    assert lines[0] == "" and lines[1].split() == ["GROUP", "COORDINATOR", "(ID)", "ASSIGNMENT-STRATEGY", "STATE",
                                                    "#MEMBERS"]
    assert lines[2] == "g" + " " * 25 + "127.0.0.1:9092  (1)" + " " * 7 + "range" + " " * 16 + "Stable" + " " * 10 + "2"
    assert state_notice("g", "Empty") == "\nConsumer group 'g' has no active members."
    assert state_notice("g", "PreparingRebalance") == "\nWarning: Consumer group 'g' is rebalancing."
    assert state_notice("g", "Stable") is None


def test_list_with_state_or_type_is_kafkas_table():
    groups = [("billing", "Consumer", "Stable"), ("a-much-longer-group-id", "Consumer", "Empty")]
    assert list_lines(groups, with_type=False, with_state=True) == [
        "GROUP".ljust(32) + " " + "STATE".ljust(20),
        "billing".ljust(32) + " " + "Stable".ljust(20),
        "a-much-longer-group-id".ljust(32) + " " + "Empty".ljust(20)]
    both = list_lines(groups[:1], with_type=True, with_state=True)
    assert [line.split() for line in both] == [["GROUP", "TYPE", "STATE"], ["billing", "Consumer", "Stable"]]
    assert list_lines([], with_type=True, with_state=False) == ["GROUP".ljust(25) + " " + "TYPE".ljust(20)]
