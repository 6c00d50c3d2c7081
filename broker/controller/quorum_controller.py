"""The active controller's decisions: requests and timers in, metadata records out.

Pure and single-threaded: every method reads the *committed* :class:`MetadataImage` and returns the
records to write; nothing changes until the records are committed by the Raft quorum and applied
to the image. The runtime (``broker.server.controller_runtime``) runs one operation at a time and
does not start the next until the previous one's records are committed, so decisions never build
on records that could still be lost.

Cluster upkeep is a reconciliation (:meth:`reconcile`): given the image and the brokers'
heartbeat times, which brokers must be fenced, which partitions need a new leader or a smaller
ISR, and which should move back to their preferred leader. Requests (create a topic, change an
ISR, register a broker) validate against the image and return records.

Heartbeat times are volatile: a new active controller gives every broker a full session from
its own start, as KRaft does.

A replica leaves an ISR only when it is known to be gone, as in Kafka: its session expired
(``handleBrokerFenced``), it is in controlled shutdown, or it restarted (registered a new
incarnation) while another ISR member is alive and heard from by this controller, so the partition
does not need it (Kafka refuses the new registration until the old session expires, which removes
it). Being fenced is not leaving: a restarted broker is fenced until it has caught up with the
metadata, and a fenced ISR member cannot lead, but it still holds everything the ISR acknowledged.
After a whole-cluster crash every broker is fenced or silent at once; shrinking ISRs to the
brokers that merely *look* alive (unfenced in the image, with the full session :meth:`activate`
gave them) would leave each partition waiting for a node that may never return. Instead the
restarted replicas stay in the ISR, the silent ones leave it when their sessions expire, and a
leaderless partition gets a leader as soon as an ISR member is unfenced.
"""
from __future__ import annotations

import random
import uuid
from dataclasses import dataclass

from broker.config import TOPIC_CONFIG, Config, altered_configs
from broker.errors import (BrokerNotAvailableError, FencedLeaderEpochError, InvalidConfigError,
                           InvalidPartitionsError, InvalidReplicaAssignmentError, InvalidReplicationFactorError,
                           InvalidRequestError, InvalidTopicError, NotLeaderOrFollowerError,
                           StaleBrokerEpochError, TopicAlreadyExistsError, UnknownTopicOrPartitionError)
from broker.controller.placement import manual_assignment, place_replicas, starting_isrs
from broker.metadata.image import MetadataImage, PartitionState, TopicImage, validate_topic_name
from broker.replication.election import elect_leader

MAX_PARTITIONS = 10_000
# The metadata log's name (its directory is "__cluster_metadata-0"): the one name Kafka's
# ControllerApis.createTopics refuses outright. Other names starting with "__" are allowed, as in Kafka.
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
# How long after a controller becomes active (at least; two broker sessions when longer) a
# replication factor only brokers still starting could satisfy is answered "not yet" (retriable)
# instead of InvalidReplicationFactor: the moments after a cluster starts, while its nodes register.
# Short, because a voter may be controller-only and never register as a broker.
JOIN_GRACE_MS = 3_000


@dataclass
class HeartbeatReply:
    fenced: bool
    should_shut_down: bool


class QuorumController:
    def __init__(self, config: Config, rng: random.Random | None = None, voters: list[int] | None = None):
        """``voters``: the quorum's node ids, which in combined mode are brokers too (see
        :meth:`check_brokers_for`)."""
        self.config = config
        self.rng = rng or random.Random()
        self.session_ms = config["broker.session.timeout.ms"]
        self.voters = list(voters) if voters is not None else [config["node.id"]]
        self.last_heartbeat: dict[int, int] = {}
        self.heard_from: set[int] = set()  # brokers that registered or heartbeated since activation
        self.next_rebalance_ms = 0
        self.active_since_ms: int | None = None
        self._settled: tuple | None = None   # (image, its offset, live brokers) the walk found nothing to do in

    def activate(self, image: MetadataImage, now_ms: int) -> None:
        """Becoming the active controller: every registered broker gets a full session from now."""
        self.last_heartbeat = {b: now_ms for b in image.brokers}
        self.heard_from = set()
        self.active_since_ms = now_ms
        self.next_rebalance_ms = now_ms + self.config["leader.imbalance.check.interval.seconds"] * 1000
        self._settled = None

    # ---------------------------------------------------------------------------- brokers
    def register_broker(self, image: MetadataImage, node_id: int, host: str, port: int,
                        incarnation: str, now_ms: int, inter_broker: tuple[str, int] | None = None) -> list[dict]:
        """A registration: a new incarnation (a restarted process) gets a new broker epoch and
        starts fenced; the same incarnation only updates its addresses, keeping its broker epoch,
        fencing and controlled shutdown (Kafka's "amending registration")."""
        self.last_heartbeat[node_id] = now_ms
        self.heard_from.add(node_id)
        known = image.brokers.get(node_id)
        if known is not None and known.incarnation == incarnation and (known.host, known.port) == (host, port) \
                and known.inter_broker == inter_broker:
            return []
        record = {"type": "register_broker", "node_id": node_id, "host": host, "port": port,
                  "incarnation": incarnation}
        if inter_broker is not None:
            record["inter_broker"] = list(inter_broker)
        if known is not None and known.incarnation == incarnation:
            record["broker_epoch"] = known.broker_epoch
            return [record, {"type": "broker_state", "node_id": node_id, "fenced": known.fenced,
                             "shutting_down": known.shutting_down}]
        restarted = known is not None
        return [record] + (self._restart_changes(image, node_id) if restarted else [])

    def _restart_changes(self, image: MetadataImage, node_id: int) -> list[dict]:
        """A restarted broker leaves the ISRs that have another member alive and heard from by
        this controller (the partition can go on without it, and it rejoins once caught up, with
        its new broker epoch); it stays in the others, which may need it to come back online."""
        live = set(image.live_brokers()) - {node_id}
        confirmed = live & self.heard_from
        changes = []
        for topic in image.topics.values():
            for index, p in enumerate(topic.partitions):
                if node_id in p.isr and confirmed & set(p.isr):
                    change = _partition_upkeep(p, live, {node_id}, unclean=False, rebalance=False)
                    if change:
                        changes.append({"type": "partition_change", "topic_id": topic.topic_id,
                                        "partition": index, **change})
        return changes

    def touch(self, image: MetadataImage, node_id: int, broker_epoch: int, at_ms: int) -> None:
        """A heartbeat of the registered epoch that arrived at ``at_ms`` still waits in the queue: its
        broker was alive then (Kafka's ``processExpiredBrokerHeartbeat``)."""
        broker = image.brokers.get(node_id)
        if broker is not None and broker.broker_epoch == broker_epoch:
            self.last_heartbeat[node_id] = max(self.last_heartbeat.get(node_id, at_ms), at_ms)

    def heartbeat(self, image: MetadataImage, node_id: int, broker_epoch: int, metadata_offset: int,
                  want_shut_down: bool, now_ms: int) -> tuple[list[dict], HeartbeatReply]:
        broker = image.brokers.get(node_id)
        if broker is None or broker.broker_epoch != broker_epoch:
            raise StaleBrokerEpochError(
                f"broker {node_id} heartbeat with epoch {broker_epoch}; the registered epoch is "
                f"{None if broker is None else broker.broker_epoch}: register again")
        self.last_heartbeat[node_id] = now_ms
        self.heard_from.add(node_id)
        records: list[dict] = []
        if want_shut_down and not broker.shutting_down:
            records.append({"type": "broker_state", "node_id": node_id, "shutting_down": True})
        elif broker.fenced and not want_shut_down and metadata_offset >= broker.broker_epoch:
            records += self._stale_leaderships(image, node_id)
            records.append({"type": "broker_state", "node_id": node_id, "fenced": False})
        done = broker.shutting_down and not self._leads_anything(image, node_id)
        # A fenced broker asking to shut down stays fenced (Kafka's FENCED -> SHUTDOWN_NOW).
        unfenced = any(r.get("fenced") is False for r in records)
        return records, HeartbeatReply(broker.fenced and not unfenced, done)

    @staticmethod
    def _stale_leaderships(image: MetadataImage, node_id: int) -> list[dict]:
        """A fenced broker still named leader (restarted, no upkeep since) gives its leaderships up
        in the entry that unfences it: the new process must never lead under its old leader epoch
        (Kafka's ``handleBrokerUncleanShutdown``). Upkeep may elect it again, in a new epoch."""
        live = set(image.live_brokers()) - {node_id}
        changes = []
        for topic in image.topics.values():
            for index, p in enumerate(topic.partitions):
                if p.leader == node_id:
                    change = _partition_upkeep(p, live, set(), unclean=False, rebalance=False)
                    if change:
                        changes.append({"type": "partition_change", "topic_id": topic.topic_id,
                                        "partition": index, **change})
        return changes

    @staticmethod
    def _leads_anything(image: MetadataImage, node_id: int) -> bool:
        return any(p.leader == node_id and len(p.isr) > 1
                   for t in image.topics.values() for p in t.partitions)

    # ---------------------------------------------------------------------------- upkeep
    def reconcile(self, image: MetadataImage, now_ms: int) -> list[dict]:
        """Fence silent brokers and drop them (and brokers in controlled shutdown) from ISRs, give
        partitions whose leader is unavailable a leader from the ISR, and (periodically) restore
        preferred leaders. A fenced broker that did not leave (one restarting) keeps its ISR places.

        Called on every step of the controller's loop. What a partition needs depends only on the
        image, the live brokers and whether this is a rebalance, so a walk that found nothing is
        not repeated until one of them changes (a walk over every partition, dozens of times a
        second, was most of an idle broker's CPU with thousands of partitions)."""
        records: list[dict] = []
        if "cluster.id" not in image.broker_configs:
            records.append({"type": "config", "resource": "broker", "name": "", "key": "cluster.id",
                            "value": uuid.UUID(int=self.rng.getrandbits(128)).hex})
        expired = [b.node_id for b in image.brokers.values()
                   if not b.fenced and now_ms - self.last_heartbeat.get(b.node_id, now_ms) > self.session_ms]
        records += [{"type": "broker_state", "node_id": b, "fenced": True} for b in expired]
        live = set(image.live_brokers()) - set(expired)
        leaving = set(expired) | {b.node_id for b in image.brokers.values() if b.shutting_down}
        rebalance = self.config["auto.leader.rebalance.enable"] and now_ms >= self.next_rebalance_ms
        if rebalance:
            self.next_rebalance_ms = now_ms + self.config["leader.imbalance.check.interval.seconds"] * 1000
        state = (id(image), image.offset, frozenset(live))
        if not rebalance and state == self._settled:
            return records
        changes = []
        for topic in image.topics.values():
            unclean = self._unclean(topic)
            for index, p in enumerate(topic.partitions):
                change = _partition_upkeep(p, live, leaving, unclean, rebalance)
                if change:
                    changes.append({"type": "partition_change", "topic_id": topic.topic_id,
                                    "partition": index, **change})
        self._settled = None if changes else state
        return records + changes

    def _unclean(self, topic: TopicImage) -> bool:
        value = topic.configs.get("unclean.leader.election.enable")
        if value is None:
            return bool(self.config["unclean.leader.election.enable"])
        return bool(TOPIC_CONFIG.parse({"unclean.leader.election.enable": value})["unclean.leader.election.enable"])

    # ---------------------------------------------------------------------------- partitions
    def alter_partition(self, image: MetadataImage, leader_id: int, topic_id: str, partition: int,
                        leader_epoch: int, partition_epoch: int, new_isr: list[int],
                        member_epochs: list | None = None) -> list[dict]:
        """A leader asks to shrink or expand its ISR (Kafka's AlterPartition). ``member_epochs``
        [(broker, broker epoch seen in its fetches)] lets us refuse a replica that restarted since
        (KIP-903): its new incarnation may have lost what the old one acknowledged."""
        topic = image.topic_by_id(topic_id)
        if topic is None or not 0 <= partition < topic.num_partitions:
            raise UnknownTopicOrPartitionError(f"partition {topic_id}:{partition} does not exist")
        p = topic.partitions[partition]
        if p.leader != leader_id or p.leader_epoch != leader_epoch:
            raise FencedLeaderEpochError(
                f"{topic.name}-{partition}: leader {p.leader} epoch {p.leader_epoch}; "
                f"request from {leader_id} with epoch {leader_epoch}")
        if p.partition_epoch != partition_epoch:
            raise NotLeaderOrFollowerError(
                f"{topic.name}-{partition}: partition epoch is {p.partition_epoch}, request had {partition_epoch}")
        if leader_id not in new_isr or not set(new_isr) <= set(p.replicas) or len(set(new_isr)) != len(new_isr):
            raise InvalidRequestError(f"ISR {new_isr} must hold the leader and only replicas of {p.replicas}")
        live = set(image.live_brokers())
        added = set(new_isr) - set(p.isr)
        if added - live:
            raise InvalidRequestError(f"replicas {sorted(added - live)} are fenced or shutting down")
        for member, epoch in member_epochs or []:
            reg = image.brokers.get(member)
            if member in added and epoch >= 0 and (reg is None or reg.broker_epoch != epoch):
                raise StaleBrokerEpochError(
                    f"replica {member} fetched with broker epoch {epoch} but is registered with "
                    f"{None if reg is None else reg.broker_epoch}: it restarted since")
        if sorted(new_isr) == sorted(p.isr):
            return []
        ordered = [r for r in p.replicas if r in new_isr]
        return [{"type": "partition_change", "topic_id": topic_id, "partition": partition, "isr": ordered}]

    # ---------------------------------------------------------------------------- topics
    def create_topic(self, image: MetadataImage, name: str, num_partitions: int, replication_factor: int,
                     configs: dict[str, str], topic_defaults: dict,
                     assignment: list[list[int]] | None = None, internal: bool = False,
                     now_ms: int | None = None) -> list[dict]:
        # Kafka's order (ControllerApis, then ReplicationControlManager.createTopics): the name, an
        # existing topic, the configs, then what createTopic checks of the request itself.
        if name == CLUSTER_METADATA_TOPIC:
            raise InvalidRequestError(f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited.")
        validate_topic_name(name)
        if name in image.topics:
            raise TopicAlreadyExistsError(f"Topic '{name}' already exists.")
        colliding = colliding_topic(image.topics, name)
        if colliding is not None:
            raise InvalidTopicError(f"Topic '{name}' collides with existing topic: {colliding}")
        nulls = [k for k, v in configs.items() if v is None]
        if nulls:
            raise InvalidConfigError(f"Null value not supported for topic configs: {','.join(nulls)}")
        TOPIC_CONFIG.parse(configs, defaults=topic_defaults)
        if assignment and (replication_factor != -1 or num_partitions != -1):
            which = "replication factor" if replication_factor != -1 else "numPartitions"
            raise InvalidRequestError(f"A manual partition assignment was specified, but {which} was not set to -1.")
        if assignment:
            placed = manual_assignment(image, assignment)
            return self._topic_records(name, placed, configs)
        if replication_factor < -1 or replication_factor == 0:   # ReplicationControlManager.createTopic
            raise InvalidReplicationFactorError(
                "Replication factor must be larger than 0, or -1 to use the default value.")
        if num_partitions < -1 or num_partitions == 0:
            raise InvalidPartitionsError("Number of partitions was set to an invalid non-positive value.")
        partitions = self.config["num.partitions"] if num_partitions == -1 else num_partitions
        if not 1 <= partitions <= MAX_PARTITIONS:
            raise InvalidPartitionsError(f"num_partitions must be between 1 and {MAX_PARTITIONS}, got {partitions}")
        factor = self.config["default.replication.factor"] if replication_factor == -1 else replication_factor
        if now_ms is not None:
            self.check_brokers_for(image, factor, now_ms)
        try:
            replicas = self.assign_replicas(image, partitions, factor)
        except InvalidReplicationFactorError as e:   # createTopic's wording; createPartitions has none
            raise InvalidReplicationFactorError(
                f"Unable to replicate the partition {factor} time(s): {e.message}") from e
        return self._topic_records(name, {"replicas": replicas, **starting_isrs(image, replicas)}, configs)

    def _topic_records(self, name: str, placed: dict, configs: dict[str, str]) -> list[dict]:
        topic_id = uuid.UUID(int=self.rng.getrandbits(128)).hex
        return ([{"type": "topic", "name": name, "topic_id": topic_id, **placed}]
                + [{"type": "config", "resource": "topic", "name": name, "key": k, "value": str(v)}
                   for k, v in sorted(configs.items())])

    def create_partitions(self, image: MetadataImage, name: str, total: int,
                          assignment: list[list[int]] | None = None) -> list[dict]:
        t = _topic(image, name)
        if total == t.num_partitions:   # ReplicationControlManager.createPartitions
            raise InvalidPartitionsError(f"Topic already has {t.num_partitions} partition(s).")
        if total < t.num_partitions:
            raise InvalidPartitionsError(f"The topic {name} currently has {t.num_partitions} partition(s); "
                                         f"{total} would not be an increase.")
        if total > MAX_PARTITIONS:
            raise InvalidPartitionsError(f"at most {MAX_PARTITIONS} partitions")
        factor, additional = len(t.partitions[0].replicas), total - t.num_partitions
        if assignment:
            if len(assignment) != additional:
                raise InvalidReplicaAssignmentError(f"Attempted to add {additional} additional partition(s), but "
                                                    f"only {len(assignment)} assignment(s) were specified.")
            placed = manual_assignment(image, assignment, factor, first=t.num_partitions)
        else:
            replicas = self.assign_replicas(image, additional, factor, first=t.num_partitions)
            placed = {"replicas": replicas, **starting_isrs(image, replicas)}
        return [{"type": "add_partitions", "name": name, "topic_id": t.topic_id, **placed}]

    def delete_topic(self, image: MetadataImage, name: str) -> list[dict]:
        t = _topic(image, name)
        return [{"type": "remove_topic", "name": name, "topic_id": t.topic_id}]

    def alter_topic_configs(self, image: MetadataImage, name: str, ops: list, incremental: bool,
                            topic_defaults: dict) -> list[dict]:
        """The topic's overrides after ``ops`` (:func:`~broker.config.altered_configs`), applied to
        the overrides this image holds and validated: an alter sent by a broker whose metadata is
        behind, or two at once, cannot undo an acknowledged change."""
        t = _topic(image, name)
        overrides = altered_configs(t.configs, ops, topic_defaults, incremental)
        TOPIC_CONFIG.parse(overrides, defaults=topic_defaults)
        records = [{"type": "config", "resource": "topic", "name": name, "key": k, "value": None}
                   for k in sorted(set(t.configs) - set(overrides))]
        records += [{"type": "config", "resource": "topic", "name": name, "key": k, "value": str(v)}
                    for k, v in sorted(overrides.items()) if t.configs.get(k) != str(v)]
        return records

    def check_brokers_for(self, image: MetadataImage, factor: int, now_ms: int) -> None:
        """Refuse "not yet" (retriable ``BrokerNotAvailable``) a replication factor the available
        brokers cannot hold but brokers still starting could, in the first ``JOIN_GRACE_MS`` (or two
        broker sessions) after this controller became active. Starting: registered brokers still
        fenced (catching up) and voters not registered yet. Kafka refuses at once, but its brokers
        take no requests before they are unfenced and a cluster's nodes come up together; here a
        client that starts a cluster and creates a topic at once waits a moment instead of failing.
        A voter may be controller-only and never register: then the refusal comes once the grace
        has passed. Later, or when even the starting brokers are too few, :meth:`assign_replicas`
        refuses for good."""
        live = image.live_brokers()
        grace = max(JOIN_GRACE_MS, 2 * self.session_ms)
        if factor <= len(live) or self.active_since_ms is None or now_ms - self.active_since_ms > grace:
            return
        starting = {b.node_id for b in image.brokers.values() if b.fenced and not b.shutting_down}
        starting |= {v for v in self.voters if v not in image.brokers}
        if factor <= len(live) + len(starting):
            raise BrokerNotAvailableError(
                f"replication factor {factor} needs {factor} brokers; {len(live)} available, "
                f"node(s) {sorted(starting)} still starting: try again in a moment")

    def assign_replicas(self, image: MetadataImage, count: int, factor: int, first: int = 0) -> list[list[int]]:
        """Replicas for ``count`` new partitions (see :func:`broker.controller.placement.place_replicas`)."""
        return place_replicas(image, self.rng, count, factor, first)

def unify_collision_chars(name: str) -> str:
    """Kafka's ``Topic.unifyCollisionChars``: '.' and '_' collide in metric names, so they count as one."""
    return name.replace(".", "_")


def colliding_topic(existing, name: str) -> str | None:
    """An existing topic other than ``name`` that differs from it only by '.' versus '_' (Kafka's
    ``ReplicationControlManager.validateNewTopicNames``), or None."""
    if "." not in name and "_" not in name:   # Topic.hasCollisionChars
        return None
    unified = unify_collision_chars(name)
    return min((t for t in existing if t != name and unify_collision_chars(t) == unified), default=None)


def _topic(image: MetadataImage, name: str) -> TopicImage:
    t = image.topics.get(name)
    if t is None:
        raise UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
    return t


def _partition_upkeep(p: PartitionState, live: set[int], leaving: set[int], unclean: bool,
                      rebalance: bool) -> dict:
    """The change one partition needs so that ``leaving`` brokers leave its ISR and its leader is
    a ``live`` one. Other ISR members stay, live or not: a fenced member that is restarting still
    holds every acknowledged record and may be the only one left to lead."""
    isr = [r for r in p.isr if r not in leaving]
    if not isr:  # Kafka keeps the last ISR member so the partition waits for it (no data loss)
        isr = [r for r in p.isr if r == p.leader] or p.isr[:1]
    leader = p.leader
    if leader not in live:
        elected = elect_leader(p.replicas, isr, live, unclean)
        leader = -1 if elected is None else elected
        if leader != -1 and leader not in isr:  # unclean election: the new leader is the ISR
            isr = [leader]
    elif rebalance:
        preferred = p.replicas[0]
        if preferred != leader and preferred in live and preferred in isr:
            leader = preferred
    change: dict = {}
    if leader != p.leader:
        change["leader"] = leader
    if isr != p.isr:
        change["isr"] = isr
    return change
