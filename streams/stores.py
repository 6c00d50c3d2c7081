"""State stores with Kafka Streams' interfaces, over one flat map per store (the *backing*).

The backing is all a runner supplies: a dict in the reference interpreter, Spark's ``MapState``
(with every change also written to the store's changelog) inside a query. Keeping the stores'
logic here, above the backing, is what makes both runners agree and makes a store restored from
its changelog identical to the one that wrote it: the changelog holds backing entries, index
entries included.

Backing keys are tuples: ``("k", key)`` for key-value entries, ``("w", key, start)`` for window
entries, ``("s", key, end, start)`` for sessions, ``("i", key)`` for a key's sorted list of window
starts or ``(end, start)`` pairs, which the range queries read instead of scanning. Window and
session stores also keep a cross-key time index — ``("t", time)``: the keys with an entry at that
window start (session end), ``("ts",)``: those times sorted — so emit-on-close and retention reach
every key's windows in time order without a scan. A window store also records its size under
``("o", "window_size")`` (once, when it first creates a window), so a reader without the topology
— ``riverlog streams query`` — knows where its windows end.
"""
from __future__ import annotations

import bisect
from typing import Any, Iterator, Protocol

from streams.record import Windowed


WINDOW_SIZE_KEY = ("o", "window_size")


class Backing(Protocol):
    def get(self, key: tuple) -> Any: ...
    def put(self, key: tuple, value: Any) -> None: ...
    def delete(self, key: tuple) -> None: ...
    def items(self) -> Iterator[tuple[tuple, Any]]: ...


class DictBacking:
    """The interpreter's backing; ``changes`` records every write in order, as a changelog would."""
    def __init__(self):
        self.data: dict[tuple, Any] = {}
        self.changes: list[tuple[tuple, Any]] = []

    def get(self, key):
        return self.data.get(key)

    def put(self, key, value):
        self.data[key] = value
        self.changes.append((key, value))

    def delete(self, key):
        if key in self.data:
            del self.data[key]
            self.changes.append((key, None))

    def items(self):
        return iter(list(self.data.items()))


def _hashable(key):
    """Backing keys must be hashable and comparable by value: dict keys (JSON structs) become sorted tuples."""
    if isinstance(key, dict):
        return ("__struct__",) + tuple(sorted((k, _hashable(v)) for k, v in key.items()))
    if isinstance(key, list):
        return ("__list__",) + tuple(_hashable(v) for v in key)
    if isinstance(key, Windowed):       # a table of a windowed stream (toStream().toTable())
        return Windowed(_hashable(key.key), key.start, key.end)
    return key


class KeyValueStore:
    kind = "keyValue"

    def __init__(self, name: str, backing: Backing):
        self.name, self.backing = name, backing
        self._keys: dict = {}

    def get(self, key):
        return self.backing.get(("k", _hashable(key)))

    def put(self, key, value) -> None:
        if value is None:
            self.delete(key)
        else:
            self.backing.put(("k", _hashable(key)), value)
            self._keys[_hashable(key)] = key

    def delete(self, key) -> None:
        self.backing.delete(("k", _hashable(key)))

    def all(self) -> list[tuple[Any, Any]]:
        """Every (key, value) — for interactive queries and tests; not used on the per-record path."""
        return [(_restore(k[1]), v) for k, v in self.backing.items() if k[0] == "k"]


class WindowStore:
    """Aggregates per (key, window start). ``retention`` bounds what ``expire`` keeps;
    ``window_size`` gives the ends :meth:`all` reports (Kafka's ``Windowed`` keys carry both)."""
    kind = "window"

    def __init__(self, name: str, backing: Backing, retention: int, window_size: int = 0):
        self.name, self.backing, self.retention, self.window_size = name, backing, retention, window_size

    def _starts(self, hk) -> list[int]:
        return list(self.backing.get(("i", hk)) or ())

    def fetch(self, key, start: int):
        return self.backing.get(("w", _hashable(key), start))

    def put(self, key, value, start: int) -> None:
        hk = _hashable(key)
        starts = self._starts(hk)
        if value is None:
            if start in starts:
                starts.remove(start)
                self.backing.delete(("w", hk, start))
                self._set_index(hk, starts)
                _untime(self.backing, start, hk)
            return
        if start not in starts:
            bisect.insort(starts, start)
            self._set_index(hk, starts)
            _time(self.backing, start, hk)
            if self.window_size and self.backing.get(WINDOW_SIZE_KEY) != self.window_size:
                self.backing.put(WINDOW_SIZE_KEY, self.window_size)
        self.backing.put(("w", hk, start), value)

    def fetch_range(self, key, time_from: int, time_to: int) -> list[tuple[int, Any]]:
        """Windows of ``key`` whose start is in [time_from, time_to], by start."""
        hk = _hashable(key)
        starts = self._starts(hk)
        lo, hi = bisect.bisect_left(starts, time_from), bisect.bisect_right(starts, time_to)
        return [(s, self.backing.get(("w", hk, s))) for s in starts[lo:hi]]

    def expire(self, key, before_start: int) -> None:
        """Drop ``key``'s windows that start before ``before_start`` (stream time − retention)."""
        hk = _hashable(key)
        starts = self._starts(hk)
        cut = bisect.bisect_left(starts, before_start)
        if cut:
            for s in starts[:cut]:
                self.backing.delete(("w", hk, s))
                _untime(self.backing, s, hk)
            self._set_index(hk, starts[cut:])

    def fetch_all(self, time_from: int, time_to: int) -> list[tuple[Any, int, Any]]:
        """Every key's windows with start in [time_from, time_to] as (key, start, value), by start,
        then by the order the keys first got a window at that start (Kafka's ``fetchAll``)."""
        out = []
        for t in _times_in(self.backing, time_from, time_to):
            for hk in self.backing.get(("t", t)) or ():
                out.append((_restore(hk), t, self.backing.get(("w", hk, t))))
        return out

    def expire_all(self, before_start: int) -> None:
        """Drop every key's windows that start before ``before_start``: retention across keys, as
        Kafka's segmented store drops whole segments, without touching live windows."""
        for t in _times_in(self.backing, -(2 ** 63), before_start - 1):
            for hk in self.backing.get(("t", t)) or ():
                self.expire(_restore(hk), before_start)

    def _set_index(self, hk, starts) -> None:
        if starts:
            self.backing.put(("i", hk), tuple(starts))
        else:
            self.backing.delete(("i", hk))

    def all(self) -> list[tuple[Windowed, Any]]:
        size = self.window_size or self.backing.get(WINDOW_SIZE_KEY) or 0
        return sorted(((Windowed(_restore(k[1]), k[2], k[2] + size), v) for k, v in self.backing.items()
                       if k[0] == "w"),
                      key=lambda e: (e[0].start, repr(e[0].key)))


class SessionStore:
    """Session aggregates per (key, end, start), as Kafka's session store."""
    kind = "session"

    def __init__(self, name: str, backing: Backing, retention: int):
        self.name, self.backing, self.retention = name, backing, retention

    def _sessions(self, hk) -> list[tuple[int, int]]:
        return list(self.backing.get(("i", hk)) or ())

    def find_sessions(self, key, earliest_end: int, latest_start: int) -> list[tuple[Windowed, Any]]:
        """Sessions of ``key`` with end ≥ earliest_end and start ≤ latest_start, by end then start."""
        hk = _hashable(key)
        out = []
        for end, start in self._sessions(hk):
            if end >= earliest_end and start <= latest_start:
                out.append((Windowed(key, start, end), self.backing.get(("s", hk, end, start))))
        return out

    def fetch_session(self, key, start: int, end: int):
        return self.backing.get(("s", _hashable(key), end, start))

    def put(self, window: Windowed, value) -> None:
        if value is None:
            self.remove(window)
            return
        hk = _hashable(window.key)
        sessions = self._sessions(hk)
        pair = (window.end, window.start)
        if pair not in sessions:
            bisect.insort(sessions, pair)
            self.backing.put(("i", hk), tuple(sessions))
            _time(self.backing, window.end, hk)
        self.backing.put(("s", hk, window.end, window.start), value)

    def remove(self, window: Windowed) -> None:
        hk = _hashable(window.key)
        sessions = self._sessions(hk)
        pair = (window.end, window.start)
        if pair in sessions:
            sessions.remove(pair)
            self.backing.delete(("s", hk, window.end, window.start))
            if sessions:
                self.backing.put(("i", hk), tuple(sessions))
            else:
                self.backing.delete(("i", hk))
            if not any(e == window.end for e, _ in sessions):
                _untime(self.backing, window.end, hk)

    def find_sessions_ending(self, earliest_end: int, latest_end: int) -> list[tuple[Windowed, Any]]:
        """Every key's sessions with end in [earliest_end, latest_end], by end (Kafka's
        time-ordered ``findSessions(earliestSessionEndTime, latestSessionEndTime)``)."""
        out = []
        for end in _times_in(self.backing, earliest_end, latest_end):
            for hk in self.backing.get(("t", end)) or ():
                for e, start in self._sessions(hk):
                    if e == end:
                        out.append((Windowed(_restore(hk), start, end), self.backing.get(("s", hk, end, start))))
        return out

    def expire_all(self, before_end: int) -> None:
        """Drop every key's sessions that ended before ``before_end`` (retention across keys)."""
        for t in _times_in(self.backing, -(2 ** 63), before_end - 1):
            for hk in self.backing.get(("t", t)) or ():
                self.expire(_restore(hk), before_end)

    def expire(self, key, before_end: int) -> None:
        """Drop ``key``'s sessions that ended before ``before_end`` (stream time − retention)."""
        for w, _ in self.find_sessions(key, -(2 ** 63), 2 ** 63 - 1):
            if w.end < before_end:
                self.remove(w)

    def all(self) -> list[tuple[Windowed, Any]]:
        return sorted(((Windowed(_restore(k[1]), k[3], k[2]), v) for k, v in self.backing.items() if k[0] == "s"),
                      key=lambda e: (e[0].start, e[0].end, repr(e[0].key)))


def _times_in(backing: Backing, lo: int, hi: int) -> list[int]:
    times = backing.get(("ts",)) or ()
    return list(times[bisect.bisect_left(times, lo):bisect.bisect_right(times, hi)])


def _time(backing: Backing, t: int, hk) -> None:
    """Index ``hk`` under time ``t`` (a window start or a session end)."""
    keys = backing.get(("t", t))
    if keys is None:
        times = list(backing.get(("ts",)) or ())
        bisect.insort(times, t)
        backing.put(("ts",), tuple(times))
        keys = ()
    if hk not in keys:
        backing.put(("t", t), keys + (hk,))


def _untime(backing: Backing, t: int, hk) -> None:
    keys = backing.get(("t", t)) or ()
    if hk not in keys:
        return
    rest = tuple(k for k in keys if k != hk)
    if rest:
        backing.put(("t", t), rest)
        return
    backing.delete(("t", t))
    times = list(backing.get(("ts",)) or ())
    times.remove(t)
    if times:
        backing.put(("ts",), tuple(times))
    else:
        backing.delete(("ts",))


def _restore(hk):
    """The user's key back from its hashable form."""
    if isinstance(hk, tuple) and hk and hk[0] == "__struct__":
        return {k: _restore(v) for k, v in hk[1:]}
    if isinstance(hk, tuple) and hk and hk[0] == "__list__":
        return [_restore(v) for v in hk[1:]]
    if isinstance(hk, Windowed):
        return Windowed(_restore(hk.key), hk.start, hk.end)
    return hk


class StoreSpec:
    """What a stateful operation needs: a named store of one kind. ``retention`` (ms) applies to
    window and session stores, ``window_size`` (ms) to window stores; the serdes encode the changelog
    (None: Riverlog's state codec)."""
    __slots__ = ("name", "kind", "retention", "key_serde", "value_serde", "logging", "window_size", "log_config",
                 "caching")

    def __init__(self, name: str, kind: str, retention: int | None = None, key_serde=None, value_serde=None,
                 logging: bool = True, window_size: int = 0, log_config: dict | None = None, caching: bool = True):
        if kind not in ("keyValue", "window", "session"):
            raise ValueError(f"store kind {kind!r}")
        self.name, self.kind, self.retention = name, kind, retention
        self.key_serde, self.value_serde, self.logging = key_serde, value_serde, logging
        self.window_size = window_size
        self.log_config = dict(log_config or {})
        self.caching = caching    # Materialized.withCachingEnabled/Disabled: whether its changes go through the record cache

    def __repr__(self):
        return f"StoreSpec({self.name!r}, {self.kind!r}, retention={self.retention})"

    def open(self, backing: Backing):
        if self.kind == "keyValue":
            return KeyValueStore(self.name, backing)
        if self.kind == "window":
            return WindowStore(self.name, backing, self.retention or 0, self.window_size)
        return SessionStore(self.name, backing, self.retention or 0)
