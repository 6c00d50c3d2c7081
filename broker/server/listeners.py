"""Which address serves whom: the client, inter-broker and controller listeners of one node.

Kafka's names: ``listeners=PLAINTEXT://h:9092,REPLICATION://h:9094``, ``inter.broker.listener.name``
and ``controller.listener.names``. A bare ``host:port`` is the client listener (PLAINTEXT). The
three are always separate sockets, so the client port never exposes Raft, controller operations,
follower fetches or transaction markers:

- **client**: the public service (produce, fetch, admin, groups, transactions) — and nothing else.
- **inter-broker**: what other brokers ask of this one (follower fetches, leader-epoch queries,
  transaction markers). When ``listeners`` does not name it, it opens on a free port of the client
  listener's host; brokers find it through this node's registration in the cluster metadata.
- **controller**: this node's ``controller.quorum.voters`` address, for Raft, controller requests
  and metadata fetches (only in a quorum of named voters; a single node's controller is in-process).
"""
from __future__ import annotations

from dataclasses import dataclass

from broker.errors import InvalidConfigError

CLIENT = "PLAINTEXT"
Address = tuple[str, int]


def parse_listeners(value: str, key: str = "listeners") -> dict[str, Address]:
    """``NAME://host:port,...`` (or a bare ``host:port`` for PLAINTEXT) as {name: (host, port)}."""
    out: dict[str, Address] = {}
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        name, sep, address = item.partition("://")
        name = name.upper() if sep else CLIENT
        address = address if sep else item
        host, colon, port_text = address.rpartition(":")
        try:
            port = int(port_text)
        except ValueError:
            port = -1
        if not colon or not 0 <= port <= 65535:
            raise InvalidConfigError(f"{key}: '{item}' is not NAME://host:port with a port from 0 to 65535",
                                     config=key)
        if name in out:
            raise InvalidConfigError(f"{key} names listener {name} twice", config=key)
        out[name] = ((host or "127.0.0.1").strip("[]"), port)
    return out


def _client_name(config, listeners: dict) -> str:
    internal = {config["inter.broker.listener.name"].strip().upper()} | {
        n.strip().upper() for n in config["controller.listener.names"].split(",")}
    return next((name for name in listeners if name not in internal), CLIENT)


def with_client_address(config, host: str | None, port: int | None) -> str:
    """``listeners`` with the client listener's host and/or port replaced (``--host``/``--port``)."""
    listeners = parse_listeners(config["listeners"])
    name = _client_name(config, listeners)
    old_host, old_port = listeners.get(name, ("127.0.0.1", 9092))
    listeners[name] = (host or old_host, old_port if port is None else port)
    return ",".join(f"{n}://{h}:{p}" for n, (h, p) in listeners.items())


@dataclass(frozen=True)
class ListenerPlan:
    client: Address
    inter_broker: Address
    controller: Address | None          # None: no controller listener (single node, or broker only)
    advertised_client: Address | None   # None: the bound client address
    advertised_inter_broker: Address | None


def plan_listeners(config, voter: Address | None) -> ListenerPlan:
    """The node's listeners from its config; ``voter`` is its own controller.quorum.voters entry
    when it is a controller in a quorum of named voters."""
    inter_name = config["inter.broker.listener.name"].strip().upper()
    controller_names = {n.strip().upper() for n in config["controller.listener.names"].split(",") if n.strip()}
    if inter_name in controller_names:
        raise InvalidConfigError("inter.broker.listener.name must not be one of controller.listener.names",
                                 config="inter.broker.listener.name")
    listeners = parse_listeners(config["listeners"])
    clients = [name for name in listeners if name != inter_name and name not in controller_names]
    if len(clients) != 1:
        raise InvalidConfigError(
            f"listeners must name exactly one client listener besides {inter_name} and "
            f"{'/'.join(sorted(controller_names))}; got {sorted(clients) or 'none'}", config="listeners")
    client = listeners[clients[0]]
    inter = listeners.get(inter_name, (client[0], 0))
    controller = None
    if voter is not None:
        named = next((listeners[n] for n in controller_names if n in listeners), None)
        if named is not None and named[1] not in (0, voter[1]):
            raise InvalidConfigError(
                f"listeners gives the controller listener port {named[1]}, but controller.quorum.voters gives "
                f"this node port {voter[1]}: they must agree", config="listeners")
        controller = (named[0] if named else client[0], voter[1])
    for name, address in (("inter-broker", inter), ("controller", controller)):
        if address is not None and address[1] != 0 and address[1] == client[1]:
            raise InvalidConfigError(
                f"the {name} listener uses port {address[1]}, which is the client listener's: internal requests "
                f"must not be reachable on the client port; give it a port of its own", config="listeners")
    advertised = parse_listeners(config["advertised.listeners"], "advertised.listeners")
    adv_client = advertised.get(clients[0]) or advertised.get(CLIENT)
    return ListenerPlan(client, inter, controller, adv_client, advertised.get(inter_name))
