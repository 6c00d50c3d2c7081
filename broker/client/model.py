"""Value types confluent-kafka exports from ``confluent_kafka`` itself (its ``_model`` package):
nodes, topic collections and descriptions, and the enums of group states and isolation levels.

    from broker.client import TopicCollection, ConsumerGroupState
    desc = admin.describe_topics(TopicCollection(["orders"]))["orders"].result()
    desc.partitions[0].leader            # Node(id=1, host='127.0.0.1', port=9092)

Enums whose values Riverlog's broker sends as names (group states, config sources) also compare
equal to those names, so ``listing.state == "Stable"`` keeps working beside
``listing.state == ConsumerGroupState.STABLE``.
"""
from __future__ import annotations

import base64
import enum
import operator
import struct
from dataclasses import dataclass, field


class _NamedEnum(enum.Enum):
    """An enum that is also equal to its wire name (``str(member)`` is that name)."""

    def __eq__(self, other):
        if isinstance(other, str):
            return other in self._wire_names()
        return enum.Enum.__eq__(self, other)

    def __hash__(self):
        return hash(self.name)

    def __str__(self):
        return self._wire_names()[0]

    def _wire_names(self) -> tuple[str, ...]:
        return (self.name,)


class ConsumerGroupState(_NamedEnum):
    """confluent-kafka's group states. Riverlog's groups use Kafka's new protocol (KIP-848), whose
    ``Assigning`` and ``Reconciling`` map to PREPARING_REBALANCING and COMPLETING_REBALANCING.
    ``UNKOWN`` is confluent's misspelt alias of UNKNOWN."""
    UNKNOWN = 0
    UNKOWN = 0
    PREPARING_REBALANCING = 1
    COMPLETING_REBALANCING = 2
    STABLE = 3
    DEAD = 4
    EMPTY = 5

    def _wire_names(self):
        return _GROUP_STATE_NAMES[self]

    @classmethod
    def of(cls, name: str) -> "ConsumerGroupState":
        """The state for a broker's state name (UNKNOWN for one it does not know)."""
        for state, names in _GROUP_STATE_NAMES.items():
            if name in names:
                return state
        return cls.UNKNOWN

    def __lt__(self, other):
        return self.value < other.value


_GROUP_STATE_NAMES = {
    ConsumerGroupState.UNKNOWN: ("Unknown",),
    ConsumerGroupState.PREPARING_REBALANCING: ("PreparingRebalance", "Assigning"),
    ConsumerGroupState.COMPLETING_REBALANCING: ("CompletingRebalance", "Reconciling"),
    ConsumerGroupState.STABLE: ("Stable",),
    ConsumerGroupState.DEAD: ("Dead",),
    ConsumerGroupState.EMPTY: ("Empty",),
}


class ConsumerGroupType(enum.Enum):
    """Which rebalance protocol a group speaks: Riverlog's groups are all ``CONSUMER`` (KIP-848)."""
    UNKNOWN = 0
    CONSUMER = 1
    CLASSIC = 2

    def __lt__(self, other):
        return self.value < other.value


class IsolationLevel(enum.Enum):
    """``AdminClient.list_offsets(..., isolation_level=)``: whether the latest offset stops at the
    last stable offset (READ_COMMITTED) or at the high watermark."""
    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1

    def __lt__(self, other):
        return self.value < other.value


class ElectionType(enum.Enum):
    """``AdminClient.elect_leaders``: the preferred replica, or any live one for a leaderless partition."""
    PREFERRED = 0
    UNCLEAN = 1


class AclOperation(enum.Enum):
    """confluent-kafka's ``AclOperation`` (Kafka's codes), what ``authorized_operations`` lists."""
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12

    def __lt__(self, other):
        return self.value < other.value


# What ``include_authorized_operations`` answers. Riverlog has no authorizer, and Kafka's brokers
# without one grant every operation a resource type supports (``AuthHelper.authorizedOperations``
# over ``AclEntry.supportedOperations``), listed in code order as librdkafka parses the bit field.
_OPS = AclOperation
TOPIC_OPERATIONS = (_OPS.READ, _OPS.WRITE, _OPS.CREATE, _OPS.DELETE, _OPS.ALTER, _OPS.DESCRIBE,
                    _OPS.DESCRIBE_CONFIGS, _OPS.ALTER_CONFIGS)
GROUP_OPERATIONS = (_OPS.READ, _OPS.DELETE, _OPS.DESCRIBE, _OPS.DESCRIBE_CONFIGS, _OPS.ALTER_CONFIGS)
CLUSTER_OPERATIONS = (_OPS.CREATE, _OPS.ALTER, _OPS.DESCRIBE, _OPS.CLUSTER_ACTION, _OPS.DESCRIBE_CONFIGS,
                      _OPS.ALTER_CONFIGS, _OPS.IDEMPOTENT_WRITE)


def authorized(operations: tuple, included: bool) -> list | None:
    """``authorized_operations`` of a description: None unless asked for, as confluent-kafka's."""
    return list(operations) if included else None


@dataclass
class Node:
    """A cluster node as confluent-kafka describes it; ``fenced``/``voter``/``broker`` are Riverlog's
    additions from DescribeCluster (whether it serves clients, whether it votes in the controller quorum)."""
    id: int
    host: str
    port: int
    rack: str | None = None
    fenced: bool = False
    voter: bool = False
    broker: bool = True

    @property
    def id_string(self) -> str:
        return str(self.id)

    @property
    def roles(self) -> str:
        return ",".join(r for r, on in (("broker", self.broker), ("controller", self.voter)) if on)


class TopicCollection:
    """The topics ``AdminClient.describe_topics`` asks about (confluent-kafka's wrapper of a name list)."""

    def __init__(self, topic_names: list[str]):
        if isinstance(topic_names, str) or not all(isinstance(t, str) for t in topic_names):
            raise TypeError("TopicCollection takes a list of topic names (str)")
        self.topic_names = list(topic_names)

    def __repr__(self):
        return f"TopicCollection({self.topic_names!r})"


@dataclass
class TopicPartitionInfo:
    """One partition in a :class:`TopicDescription`: its leader, replicas and in-sync replicas as Nodes."""
    id: int
    leader: Node | None
    replicas: list[Node] = field(default_factory=list)
    isr: list[Node] = field(default_factory=list)


@dataclass
class TopicDescription:
    """What ``describe_topics`` resolves to per topic. ``authorized_operations``: None unless
    asked for, then every topic operation (no authorizer, see :data:`TOPIC_OPERATIONS`)."""
    name: str
    topic_id: str
    is_internal: bool
    partitions: list[TopicPartitionInfo]
    authorized_operations: list | None = None


class Uuid:
    """A 128-bit id (Kafka's topic ids) as confluent-kafka's ``Uuid``: two signed 64-bit halves,
    shown as librdkafka shows it (base64 of the 16 big-endian bytes, unpadded). Like confluent's C
    type it defines no equality, so two Uuids are equal only when they are the same object.

        Uuid(1, 2).get_most_significant_bits()   # 1
    """

    __slots__ = ("_msb", "_lsb")

    def __init__(self, most_significant_bits: int, least_significant_bits: int):
        for bits in (most_significant_bits, least_significant_bits):
            if not -(1 << 63) <= operator.index(bits) < (1 << 63):
                raise OverflowError(f"{bits} does not fit a signed 64-bit half of a Uuid")
        self._msb = operator.index(most_significant_bits)
        self._lsb = operator.index(least_significant_bits)

    def get_most_significant_bits(self) -> int:
        return self._msb

    def get_least_significant_bits(self) -> int:
        return self._lsb

    def __hash__(self):
        return hash(self._msb ^ self._lsb)

    def __repr__(self):
        raw = struct.pack(">qq", self._msb, self._lsb)
        return base64.b64encode(raw).decode()[:22]

    __str__ = __repr__


class ThrottleEvent:
    """A request the broker throttled, as a ``throttle_cb`` receives it. Riverlog's brokers have no
    quotas, so no callback receives one; the class is here so code that names it imports."""

    def __init__(self, broker_name: str, broker_id: int, throttle_time: float):
        self.broker_name = broker_name
        self.broker_id = broker_id
        self.throttle_time = throttle_time

    def __str__(self):
        return f"{self.broker_name}/{self.broker_id} throttled for {int(self.throttle_time * 1000)} ms"
