"""The values Debezium's column mappers write: a hashed pseudonym (``MaskStrings`` with a hash)
and a truncated string or byte array (``TruncateColumn``), byte for byte.

A pseudonym is the lower-case hex of ``digest(salt + data)``: ``salt`` is the salt's UTF-8 (Java's
``String.getBytes()`` under its default charset, UTF-8 since Java 18) and ``data`` is

- V1 (``column.mask.hash.<algorithm>.with.salt.<salt>``): the value as Java's
  ``ObjectOutputStream.writeObject(String)`` writes it — the stream header ``AC ED 00 05``, then
  ``74`` (TC_STRING), a 2-byte big-endian length and the modified UTF-8 (UTF-16 units, U+0000 as
  ``C0 80``, each surrogate in 3 bytes); past 65535 bytes ``7C`` (TC_LONGSTRING) and an 8-byte length;
- V2 (``column.mask.hash.v2.…``): the value's UTF-8 alone, so another system can hash it the same.

The algorithm is a Java ``MessageDigest`` name (case ignored, with the SUN provider's aliases).
Truncation counts as Java's ``String.length()`` does, in UTF-16 units: a cut inside a surrogate pair
keeps its high half, which JSON then carries as a ``\\uD83D`` escape, as Jackson writes it.

    >>> pseudonym("hello", "sha-256", b"salt", 2)[:16]
    'cd31b3b98ece60cb'
"""
from __future__ import annotations

import base64
import hashlib
import re
import struct
from typing import Optional

DIGESTS = {"md5": "md5", "sha": "sha1", "sha1": "sha1", "sha-1": "sha1", "sha-224": "sha224", "sha224": "sha224",
           "sha-256": "sha256", "sha256": "sha256", "sha-384": "sha384", "sha384": "sha384", "sha-512": "sha512",
           "sha512": "sha512", "sha-512/224": "sha512_224", "sha512/224": "sha512_224", "sha-512/256": "sha512_256",
           "sha512/256": "sha512_256", "sha3-224": "sha3_224", "sha3-256": "sha3_256", "sha3-384": "sha3_384",
           "sha3-512": "sha3_512"}
"""Java's standard ``MessageDigest`` names and SUN aliases -> hashlib's (MD2 is not offered here)."""
_STREAM_HEADER = b"\xac\xed\x00\x05"
TC_STRING, TC_LONGSTRING = 0x74, 0x7C


def digest_name(algorithm: str) -> Optional[str]:
    """hashlib's name for a Java ``MessageDigest`` algorithm name, None if not offered."""
    return DIGESTS.get(algorithm.strip().lower())


def modified_utf8(text: str) -> bytes:
    """Java's ``DataOutput.writeUTF`` body: UTF-16 units in CESU-8, U+0000 as ``C0 80``."""
    if text.isascii() and "\x00" not in text:
        return text.encode("ascii")
    units = text.encode("utf-16-le", "surrogatepass")
    split = "".join(chr(u) for u in struct.unpack(f"<{len(units) // 2}H", units))
    return split.encode("utf-8", "surrogatepass").replace(b"\x00", b"\xc0\x80")


def java_serialized(text: str) -> bytes:
    """``ObjectOutputStream.writeObject(text)``'s bytes, header included (V1's hash input)."""
    body = modified_utf8(text)
    if len(body) <= 0xFFFF:
        return _STREAM_HEADER + struct.pack(">BH", TC_STRING, len(body)) + body
    return _STREAM_HEADER + struct.pack(">Bq", TC_LONGSTRING, len(body)) + body


def pseudonym(value: str, algorithm: str, salt: bytes, version: int) -> str:
    """Debezium's ``HashValueConverter``: hex of ``digest(salt + V1/V2 bytes of value)``."""
    data = java_serialized(value) if version == 1 else value.encode("utf-8", "replace")
    h = hashlib.new(digest_name(algorithm) or algorithm)
    h.update(salt)
    h.update(data)
    return h.hexdigest()


def utf16_length(text: str) -> int:
    """Java's ``String.length()``: UTF-16 units (a character outside the BMP counts 2)."""
    return len(text) if text.isascii() else len(text.encode("utf-16-le", "surrogatepass")) // 2


def truncate_text(text: str, length: int) -> str:
    """Java's ``text.substring(0, length)`` when the text is longer (UTF-16 units)."""
    if len(text) * 2 <= length or utf16_length(text) <= length:
        return text
    if text.isascii():
        return text[:length]
    return text.encode("utf-16-le", "surrogatepass")[:2 * length].decode("utf-16-le", "surrogatepass")


def truncate_base64(value: str, length: int) -> str:
    """A BYTES value (JSON base64, as JsonConverter writes a ``ByteBuffer``) cut to ``length`` bytes."""
    data = base64.b64decode(value)
    return value if len(data) <= length else base64.b64encode(data[:length]).decode("ascii")


_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_json(text: str) -> bytes:
    """JSON text's UTF-8; a lone UTF-16 surrogate (a string truncated inside a pair) becomes the
    ``\\uD83D`` escape Jackson writes, UTF-8 having no form for it."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04X}", text).encode("utf-8")
