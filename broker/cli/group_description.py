"""What ``riverlog groups describe`` prints, as Kafka's ``ConsumerGroupCommand`` prints it, so that
scripts written for ``kafka-consumer-groups.sh --describe`` read it unchanged (a pure function of
what the admin client reports).

    offsets_lines(rows)            # ["", "GROUP  TOPIC ... CONSUMER-ID HOST CLIENT-ID", "billing orders 0 ..."]
    members_lines("billing", members, verbose=True)
    state_lines("billing", "127.0.0.1:9092  (1)", "range", "Stable", 2)
    state_notice("billing", "Empty")   # "\\nConsumer group 'billing' has no active members." (stderr)

Each view starts with an empty line and pads its columns as Kafka's ``printf`` formats do
(``printOffsetFormat``, ``printMembers``, ``printStates``). The per-partition view has one row per
partition a member owns (members with the most partitions first; a member owning none gets a row of
``-``), then the partitions with a committed offset that nobody owns (``CONSUMER-ID`` ``-``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Member", "MISSING", "list_lines", "members_lines", "offset_rows", "offsets_lines", "state_lines",
           "state_notice"]

MISSING = "-"
REBALANCING = {"PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling"}


@dataclass
class Member:
    consumer_id: str
    host: str
    client_id: str
    partitions: list[tuple[str, int]] = field(default_factory=list)
    group_instance_id: str | None = None


def state_notice(group_id: str, state: str) -> str | None:
    """``shouldPrintMemberState``'s line on standard error for a group that is not Stable."""
    if state == "Empty":
        return f"\nConsumer group '{group_id}' has no active members."
    if state in REBALANCING:
        return f"\nWarning: Consumer group '{group_id}' is rebalancing."
    return None


def offset_rows(group_id: str, members: list[Member], committed: dict, ends: dict) -> list[list[str]]:
    """Kafka's ``collectGroupOffsets`` rows: ``committed`` maps (topic, partition) to the committed
    offset, ``ends`` to the log end offset; a missing value prints ``-``, and so does the lag."""
    def row(tp, consumer_id, host, client_id):
        current, end = committed.get(tp), ends.get(tp)
        lag = MISSING if current is None or end is None else str(end - current)
        return [group_id, tp[0], str(tp[1]), MISSING if current is None else str(current),
                MISSING if end is None else str(end), lag, consumer_id, host, client_id]

    rows, owned = [], set()
    for m in sorted(members, key=lambda m: -len(m.partitions)):       # stable: ties keep their order
        if not m.partitions:
            rows.append([group_id, MISSING, MISSING, MISSING, MISSING, MISSING, m.consumer_id, m.host, m.client_id])
        for tp in sorted(m.partitions):
            owned.add(tp)
            rows.append(row(tp, m.consumer_id, m.host, m.client_id))
    rows += [row(tp, MISSING, MISSING, MISSING) for tp in sorted(set(committed) - owned)]
    return rows


def _pad(values, widths) -> str:
    """Java's ``%-Ns`` for each width, one space apart; a width of None is a bare ``%s``."""
    return " ".join(v if w is None else v.ljust(w) for v, w in zip(values, widths))


OFFSET_HEADERS = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                  "CLIENT-ID"]


def offsets_lines(rows: list[list[str]]) -> list[str]:
    """``printOffsets``: an empty line, the header, the rows; nothing without rows."""
    if not rows:
        return []
    wide = {i: max([15] + [len(r[i]) for r in rows]) for i in (0, 1, 6, 7)}
    widths = [wide[0], wide[1], 10, 15, 15, 15, wide[6], wide[7], None]
    return [""] + [_pad(r, widths) for r in [OFFSET_HEADERS] + rows]


def members_lines(group_id: str, members: list[Member], verbose: bool) -> list[str]:
    """``printMembers``: ``GROUP CONSUMER-ID [GROUP-INSTANCE-ID] HOST CLIENT-ID #PARTITIONS`` (the
    instance column when any member has one) and, with ``verbose``, ``ASSIGNMENT`` as
    ``topic(0,1), other(2)``; each line as Kafka pads it, trailing spaces included."""
    with_instance = any(m.group_instance_id for m in members)
    rows = []
    for m in members:
        cells = [group_id, m.consumer_id] + ([m.group_instance_id or ""] if with_instance else []) + \
            [m.host, m.client_id, str(len(m.partitions))]
        if verbose:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in m.partitions:
                by_topic.setdefault(topic, []).append(partition)
            cells.append(", ".join(sorted(f"{t}({','.join(str(p) for p in sorted(ps))})"
                                          for t, ps in by_topic.items())) or MISSING)
        rows.append(cells)
    header = ["GROUP", "CONSUMER-ID"] + (["GROUP-INSTANCE-ID"] if with_instance else []) + \
        ["HOST", "CLIENT-ID", "#PARTITIONS"]
    mins = [15, 15] + ([17] if with_instance else []) + [15, 15, 15]
    widths = [max([w] + [len(r[i]) for r in rows]) for i, w in enumerate(mins[:-1])] + [15]
    head = _pad(header, widths) + " " + ("ASSIGNMENT" if verbose else "")
    lines = [_pad(r[:len(widths)], widths) + " " + (r[-1] if verbose else "") for r in rows]
    return ["", head] + lines


def state_lines(group_id: str, coordinator: str, assignor: str, state: str, members: int) -> list[str]:
    """``printStates`` for one group: an empty line, the header, its row (the first column as wide
    as the coordinator's, as Kafka's format has it)."""
    first = max(25, len(coordinator))
    widths = [first, 25, 20, 15, None]
    return ["", _pad(["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"], widths),
            _pad([group_id, coordinator, assignor, state, str(members)], widths)]


def list_lines(groups: list[tuple[str, str, str]], with_type: bool, with_state: bool) -> list[str]:
    """``printGroupInfo`` (``--list --state``/``--type``): ``GROUP`` as wide as the longest id (at
    least 15) plus 10, then ``TYPE`` and/or ``STATE`` 20 wide each; rows are (group, type, state)."""
    first = max([15] + [len(g[0]) for g in groups]) + 10
    shown = [i for i, on in ((1, with_type), (2, with_state)) if on]
    return [" ".join([r[0].ljust(first)] + [str(r[i]).ljust(20) for i in shown])
            for r in [("GROUP", "TYPE", "STATE")] + list(groups)]
