"""A client connection's host as Kafka prints it for a group member (``DescribeGroups``' client
host, ``kafka-consumer-groups --describe``'s HOST column): Java's ``InetAddress.toString()`` of
the connection's address, "/127.0.0.1" or "/0:0:0:0:0:0:0:1", taken from gRPC's peer string."""
from __future__ import annotations

import ipaddress


def client_host(peer: str) -> str:
    """``peer`` is gRPC's ("ipv4:127.0.0.1:50312", "ipv6:[::1]:50312", "ipv6:%5B::1%5D:50312");
    a transport without an IP address (a Unix socket) has no host: ""."""
    kind, _, rest = peer.partition(":")
    if kind not in ("ipv4", "ipv6"):
        return ""
    host = rest.replace("%5B", "[").replace("%5D", "]").rsplit(":", 1)[0].strip("[]").split("%", 1)[0]
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return ""
    if isinstance(address, ipaddress.IPv6Address):   # Java writes every group, without leading zeros
        return "/" + ":".join(format(int(g, 16), "x") for g in address.exploded.split(":"))
    return f"/{address}"
