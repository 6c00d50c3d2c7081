"""A member's client host from gRPC's peer string, as Kafka prints it (Java's InetAddress.toString())."""
from __future__ import annotations

import pytest

from broker.server.client_host import client_host

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("peer, host", [
    ("ipv4:127.0.0.1:50312", "/127.0.0.1"),
    ("ipv4:10.0.12.7:1", "/10.0.12.7"),
    ("ipv6:[::1]:50312", "/0:0:0:0:0:0:0:1"),              # every group, no leading zeros
    ("ipv6:%5B::1%5D:50312", "/0:0:0:0:0:0:0:1"),          # as some gRPC versions escape it
    ("ipv6:[2001:db8::ff00:42:8329]:9", "/2001:db8:0:0:0:ff00:42:8329"),
    ("ipv6:[fe80::1%eth0]:5", "/fe80:0:0:0:0:0:0:1"),      # the zone is not part of the address
    ("unix:/tmp/riverlog.sock", ""),                       # no IP address: no host
    ("", ""),
    ("ipv4:not-an-address:1", ""),
])
def test_client_host_is_javas_inet_address_text(peer, host):
    assert client_host(peer) == host
