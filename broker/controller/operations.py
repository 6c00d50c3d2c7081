"""Controller operations by name: what a request to the controller does, as a pure function.

Each operation is ``fn(controller, image, now_ms, body) -> (records, result)``; the runtime runs it
on the active controller, commits the records, then answers with ``result`` (a dict, completed
with ``offset``: the metadata offset at which the change is visible). A ``result`` that is a
callable receives the commit offset (a broker's epoch is the offset of its registration).
"""
from __future__ import annotations

from broker.config import TOPIC_CONFIG
from broker.controller import leader_elections
from broker.errors import ElectionNotNeededError, InvalidRequestError


def register_broker(c, image, now, body):
    inter = body.get("inter_broker")
    records = c.register_broker(image, body["node_id"], body["host"], body["port"], body["incarnation"], now,
                                (inter[0], inter[1]) if inter else None)
    if records and "broker_epoch" in records[0]:   # the same incarnation: its epoch stays
        return records, lambda offset: {"broker_epoch": records[0]["broker_epoch"], "offset": offset}
    if records:
        return records, lambda offset: {"broker_epoch": offset, "offset": offset}
    return [], {"broker_epoch": image.brokers[body["node_id"]].broker_epoch, "offset": image.offset}


def heartbeat(c, image, now, body):
    records, reply = c.heartbeat(image, body["node_id"], body["broker_epoch"], body["metadata_offset"],
                                 body.get("want_shut_down", False), now)
    return records, {"fenced": reply.fenced, "should_shut_down": reply.should_shut_down}


def alter_partition(c, image, now, body):
    return c.alter_partition(image, body["leader_id"], body["topic_id"], body["partition"],
                             body["leader_epoch"], body["partition_epoch"], body["isr"],
                             body.get("member_epochs")), {}


def create_topic(c, image, now, body):
    defaults = _topic_defaults(c)
    records = c.create_topic(image, body["name"], body["num_partitions"], body["replication_factor"],
                             body.get("configs", {}), defaults, assignment=body.get("assignment"), now_ms=now)
    return ([] if body.get("validate_only") else records), {}


def create_internal_topic(c, image, now, body):
    """An internal topic (``__consumer_offsets``), created on first use by a broker, never by a
    client: idempotent, and its replication factor capped by the brokers there are. A registered
    broker that is down counts, as Kafka's placer counts it (``StripedReplicaPlacer``): it gets its
    replicas, out of the ISR until it is back, so one broker away when the first group starts does
    not leave the topic with fewer replicas for good."""
    if body["name"] in image.topics:
        return [], {}
    registered = [b for b in image.brokers.values() if not b.shutting_down]
    factor = max(1, min(body["replication_factor"], len(registered)))
    return c.create_topic(image, body["name"], body["num_partitions"], factor, body.get("configs", {}),
                          _topic_defaults(c), internal=True), {}


PRODUCER_ID_BLOCK = 1000


def allocate_producer_ids(c, image, now, body):
    """A block of producer ids for one broker (KIP-730): unique across the cluster because the
    next free id is a committed metadata record."""
    start = image.next_producer_id
    return ([{"type": "producer_ids", "next": start + PRODUCER_ID_BLOCK}],
            {"start": start, "end": start + PRODUCER_ID_BLOCK})


def delete_topic(c, image, now, body):
    if not c.config["delete.topic.enable"]:
        from broker.errors import TopicDeletionDisabledError
        raise TopicDeletionDisabledError("Topic deletion is disabled. (delete.topic.enable=false)")
    return c.delete_topic(image, body["name"]), {}


def alter_topic_configs(c, image, now, body):
    records = c.alter_topic_configs(image, body["name"], body["ops"], body["incremental"], _topic_defaults(c))
    return ([] if body.get("validate_only") else records), {}


def create_partitions(c, image, now, body):
    records = c.create_partitions(image, body["name"], body["total"], body.get("assignment"))
    return ([] if body.get("validate_only") else records), {}


def elect_leaders(c, image, now, body):
    """A PREFERRED or UNCLEAN election of a topic's partitions (Kafka's
    ``ReplicationControlManager.electLeaders``), answered per partition: ``elected`` and
    ``errors`` as ``[partition, code, message]``. Electing every partition (no ``partitions``)
    leaves out those that needed no election, as Kafka does."""
    partitions = body.get("partitions")
    records, errors = leader_elections.elect_leaders(image, body["topic"], partitions, bool(body.get("unclean")))
    if partitions is None:
        errors = {i: e for i, e in errors.items() if not isinstance(e, ElectionNotNeededError)}
    return records, {"elected": sorted(r["partition"] for r in records),
                     "errors": [[i, e.code, e.message] for i, e in sorted(errors.items())]}


def _topic_defaults(c) -> dict:
    from broker.config import topic_defaults
    defaults = topic_defaults(c.config)
    TOPIC_CONFIG.parse({}, defaults=defaults)
    return defaults


OPERATIONS = {fn.__name__: fn for fn in (register_broker, heartbeat, alter_partition, create_topic,
                                         create_internal_topic, allocate_producer_ids, delete_topic,
                                         alter_topic_configs, create_partitions, elect_leaders)}


def operation(name: str, body: dict):
    fn = OPERATIONS.get(name)
    if fn is None:
        raise InvalidRequestError(f"unknown controller operation {name!r}")

    def run(controller, image, now):
        return fn(controller, image, now, body)
    # A heartbeat waiting in the controller's queue already shows its broker alive (see
    # ControllerRuntime: the upkeep that may fence it can run before the heartbeat does).
    run.heartbeat = (body.get("node_id"), body.get("broker_epoch")) if name == "heartbeat" else None
    return run
