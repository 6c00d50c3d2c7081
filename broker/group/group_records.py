"""The records that persist a ``__consumer_offsets`` partition's groups: their layout, a group's
state written as records, and the records replayed into groups.

Kept apart from :class:`~broker.group.coordinator.GroupShard` because it is a format: what the log
holds, which must read back the same after a restart or a change of coordinator. Pure.

Records are JSON, keyed so that compaction keeps exactly the latest state of each thing:
``{"type": "offset", "group", "topic", "partition"}``, ``{"type": "group", "group"}``,
``{"type": "member", "group", "member"}``, ``{"type": "fenced_member", "group", "member"}`` and, for
offsets committed inside a transaction and not yet decided,
``{"type": "txn_offset", "group", "producer", "topic", "partition"}``, with the newest epoch seen of
each such producer under ``{"type": "txn_producer", "group", "producer"}``; a null value
(tombstone) deletes. Keys are sorted JSON, so every key of a group starts with its
:func:`group_key_prefix`. An offset value carries ``position``, the order of offset writes (see
:mod:`broker.group.coordinator`).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping

from broker.group.assignors import TP
from broker.group.group import Committed, ConsumerGroup, Member

Record = tuple[bytes, "bytes | None"]


def _key(**fields) -> bytes:
    return json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()


def _value(doc) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


def _tps(items: Iterable[TP]) -> list[list]:
    return [[t, p] for t, p in sorted(items)]


def _offset_value(c: Committed) -> bytes:
    return _value({"offset": c.offset, "metadata": c.metadata, "leader_epoch": c.leader_epoch,
                   "commit_timestamp": c.commit_timestamp, "position": c.position})


def _committed(value: dict) -> Committed:
    return Committed(value["offset"], value.get("metadata", ""), value.get("leader_epoch", -1),
                     value.get("commit_timestamp", -1), value.get("position", -1))


def group_key_prefix(group_id: str) -> bytes:
    """What every key of the group starts with (then a comma): keys are sorted JSON, "group" first."""
    return _key(group=group_id)[:-1]


def state_records(group: ConsumerGroup) -> dict[bytes, bytes]:
    """The value of every key that holds ``group``'s state now."""
    out = {}
    for (topic, partition), c in group.offsets.items():
        out[_key(type="offset", group=group.group_id, topic=topic, partition=partition)] = _offset_value(c)
    for producer, offsets in group.pending.items():
        for (topic, partition), c in offsets.items():
            out[_key(type="txn_offset", group=group.group_id, producer=producer, topic=topic,
                     partition=partition)] = _offset_value(c)
    for producer, epoch in group.producer_epochs.items():
        value = {"epoch": epoch}
        if producer in group.coordinator_epochs:
            value["coordinator_epoch"] = group.coordinator_epochs[producer]
        if producer in group.producer_ended:
            value["ended_ms"] = group.producer_ended[producer]
        out[_key(type="txn_producer", group=group.group_id, producer=producer)] = _value(value)
    for member_id in group.fenced_members:
        out[_key(type="fenced_member", group=group.group_id, member=member_id)] = b"{}"
    if group.members or group.group_epoch:
        out[_key(type="group", group=group.group_id)] = _value(
            {"assignor": group.assignor, "group_epoch": group.group_epoch,
             "assignment_epoch": group.assignment_epoch, "topic_sizes": group.topic_sizes})
    for m in group.members.values():
        out[_key(type="member", group=group.group_id, member=m.member_id)] = _value(
            {"instance_id": m.instance_id, "client_id": m.client_id, "client_host": m.client_host, "topics": m.topics,
             "session_timeout_ms": m.session_timeout_ms, "rebalance_timeout_ms": m.rebalance_timeout_ms,
             "epoch": m.epoch, "previous_epoch": m.previous_epoch, "assigned": _tps(m.assigned),
             "eager_cleared": m.eager_cleared, "left": m.left_ms is not None, "assignors": m.assignors,
             "target": _tps(group.target.get(m.member_id, ())), "revoking": _tps(m.owned - m.assigned)})
    return out


def replay(latest: Mapping[bytes, bytes], group_of: Callable[[str], ConsumerGroup], now_ms: int) -> int:
    """Apply the latest value of every key to the groups ``group_of(group_id)`` gives (creating
    them); members get a fresh session. Returns one past the highest offset write position read (0
    for none)."""
    position = 0
    members = []
    for raw_key, raw_value in latest.items():
        key, value = json.loads(raw_key), json.loads(raw_value)
        group = group_of(key["group"])
        if key["type"] == "offset":
            group.offsets[(key["topic"], key["partition"])] = c = _committed(value)
            position = max(position, c.position + 1)
        elif key["type"] == "group":
            group.assignor = value.get("assignor", "")
            group.group_epoch = value.get("group_epoch", 0)
            group.assignment_epoch = value.get("assignment_epoch", 0)
            group.topic_sizes = dict(value.get("topic_sizes", {}))
        elif key["type"] == "member":
            members.append((group, key["member"], value))
        elif key["type"] == "txn_offset":
            c = group.pending.setdefault(key["producer"], {})[(key["topic"], key["partition"])] = _committed(value)
            position = max(position, c.position + 1)
        elif key["type"] == "fenced_member":
            group.fenced_members[key["member"]] = None
        elif key["type"] == "txn_producer":
            group.producer_epochs[key["producer"]] = value["epoch"]
            if "coordinator_epoch" in value:
                group.coordinator_epochs[key["producer"]] = value["coordinator_epoch"]
            if "ended_ms" in value:
                group.producer_ended[key["producer"]] = value["ended_ms"]
    for group, member_id, v in members:  # after the group records: a member's default assignor is its group's
        assigned, revoking = {tuple(x) for x in v["assigned"]}, {tuple(x) for x in v.get("revoking", [])}
        member = Member(member_id, v.get("instance_id", ""), v.get("client_id", ""), v["topics"],
                        v["session_timeout_ms"], v["rebalance_timeout_ms"], now_ms, v["epoch"],
                        v.get("previous_epoch", -1), assigned, assigned | revoking, v.get("eager_cleared", -1),
                        assignors=v.get("assignors") or [group.assignor or "range"],
                        client_host=v.get("client_host", ""))
        if revoking:  # its rebalance timeout starts again, as Kafka's onLoaded schedules it
            member.revoking_since_ms, member.revoking = now_ms, set(revoking)
        if v.get("left"):
            member.left_ms = now_ms
        group.members[member_id] = member
        group.target[member_id] = {tuple(x) for x in v.get("target", [])}
    return position
