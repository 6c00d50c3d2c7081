"""``version()`` and ``libversion()`` as confluent-kafka has them. Riverlog's client has no
librdkafka underneath, so both report the Riverlog client's own version; ``libversion()``'s
integer uses librdkafka's encoding (0xMMmmrrff, ``ff`` for a release) so comparisons written
against it still order versions.

    version()       # "0.1.0"
    libversion()    # ("0.1.0", 0x000100ff)
"""
from __future__ import annotations

import re
from importlib import metadata


def version() -> str:
    """The Riverlog client's version (confluent-kafka's returns its own module version)."""
    try:
        return metadata.version("riverlog")
    except metadata.PackageNotFoundError:
        return "0.0.0"


def libversion() -> tuple[str, int]:
    """(version string, version as librdkafka encodes it)."""
    text = version()
    parts = [int(n) for n in re.findall(r"\d+", text)[:3]] + [0, 0, 0]
    major, minor, patch = parts[:3]
    return text, (major & 0xFF) << 24 | (minor & 0xFF) << 16 | (patch & 0xFF) << 8 | 0xFF
