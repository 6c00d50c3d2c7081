"""How store entries become bytes for Spark's ``MapState`` and the changelog topics.

Keys are canonical (equal keys give equal bytes, which a map keyed by bytes needs): compact JSON
with tags for bytes, tuples, non-finite floats and windowed keys (a table of a windowed stream,
``toStream().toTable()``, keys its store by them). Values are pickled behind a format byte, so a
later format can be told apart.
"""
from __future__ import annotations

import base64
import json
import math
import pickle

from streams.record import Windowed

VALUE_FORMAT = 1


def _plain(x):
    if isinstance(x, bool) or x is None or isinstance(x, str):
        return x
    if isinstance(x, int):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else {"$f": repr(x)}
    if isinstance(x, bytes):
        return {"$b": base64.b64encode(x).decode()}
    if isinstance(x, tuple):
        return {"$t": [_plain(v) for v in x]}
    if isinstance(x, list):
        return [_plain(v) for v in x]
    if isinstance(x, dict):
        return {"$d": [[_plain(k), _plain(v)] for k, v in sorted(x.items(), key=lambda kv: repr(kv[0]))]}
    if isinstance(x, Windowed):
        return {"$w": [_plain(x.key), x.start, x.end]}
    raise TypeError(f"a store key of type {type(x).__name__} cannot be encoded; use str, int, float, bytes, "
                    f"tuples, lists or dicts of them")


def _back(x):
    if isinstance(x, list):
        return [_back(v) for v in x]
    if isinstance(x, dict):
        if "$b" in x:
            return base64.b64decode(x["$b"])
        if "$t" in x:
            return tuple(_back(v) for v in x["$t"])
        if "$f" in x:
            return float(x["$f"])
        if "$d" in x:
            return {_back(k): _back(v) for k, v in x["$d"]}
        if "$w" in x:
            key, start, end = x["$w"]
            return Windowed(_back(key), start, end)
    return x


def encode_key(key) -> bytes:
    return json.dumps(_plain(key), separators=(",", ":"), ensure_ascii=False).encode()


def decode_key(data: bytes):
    return _back(json.loads(data))


def encode_value(value) -> bytes:
    return bytes([VALUE_FORMAT]) + pickle.dumps(value, protocol=5)


def decode_value(data: bytes):
    if not data or data[0] != VALUE_FORMAT:
        raise ValueError(f"state value format {data[:1]!r} is not {VALUE_FORMAT}: written by another version?")
    return pickle.loads(data[1:])
