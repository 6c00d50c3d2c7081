"""Parameter types of the ``riverlog`` command, so bad input fails as one ``Error:`` line.

Every option with a bounded value uses one of these types instead of a bare ``int`` or ``str``:
click then reports a bad value as ``Error: Invalid value for '--port': ...`` (exit status 2)
before anything runs. ``check_broker_values`` puts the same checks on values that reach the broker
through ``--config`` or ``--properties``, and :func:`check_listener_free` turns a port already in
use into a message instead of a gRPC bind traceback.

    @click.option("--port", type=PORT)
    @click.option("--time", type=TIMESTAMP)    # earliest, latest, ms since the epoch, ISO-8601
"""
from __future__ import annotations

import datetime as dt
import errno
import os
import socket

import click

INT32_MAX = 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
# Kafka's ListOffsetsRequest special timestamps, by GetOffsetShell.parseOffsetSpec's names.
NAMED_TIMES = {"earliest": -2, "latest": -1, "max-timestamp": -3, "earliest-local": -4, "latest-tiered": -5}


class _Range(click.IntRange):
    """An integer in [min, max] whose error also says what to pass."""

    def __init__(self, min: int | None, max: int | None, hint: str, name: str = "integer"):
        super().__init__(min, max)
        self.hint, self.name = hint, name

    def convert(self, value, param, ctx):
        try:
            return super().convert(value, param, ctx)
        except click.BadParameter as e:
            self.fail(f"{e.message.rstrip('.')}; {self.hint}", param, ctx)


PORT = _Range(0, 65535, "use a port from 1 to 65535, or 0 to pick a free one", "port")
NODE_ID = _Range(0, INT32_MAX, "node ids are 0 or more")
PARTITION = _Range(0, INT32_MAX, "partitions are numbered from 0")
COUNT = _Range(0, INT32_MAX, "use a number of 0 or more")
POSITIVE = _Range(1, INT32_MAX, "use a number of 1 or more")
OFFSET = _Range(INT64_MIN, INT64_MAX, "offsets are 64-bit integers")
EPOCH = _Range(0, 32767, "producer epochs are 16-bit, from 0")
LOG_LEVEL = click.Choice(["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], case_sensitive=False)


class _CountOrDefault(_Range):
    """A count of 1 or more, or -1 for the broker's default; 0 is refused with Kafka's
    ``TopicCommand`` message instead of being sent to the broker."""

    def __init__(self, max: int, kafka_message: str):
        super().__init__(-1, max, "use 1 or more, or -1 for the broker's default")
        self.kafka_message = kafka_message

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if number == 0:
            self.fail(f"{self.kafka_message}; {self.hint}", param, ctx)
        return number


PARTITION_COUNT = _CountOrDefault(INT32_MAX, "The partitions must be greater than 0")
REPLICATION_FACTOR = _CountOrDefault(32767, "The replication factor must be between 1 and 32767 inclusive")
OFFSET_OR_HIGH_WATERMARK = _Range(-1, INT64_MAX, "use an offset of 0 or more, or -1")


class _ReplicaAssignment(click.ParamType):
    """``kafka-topics --replica-assignment``: ``1:2,2:3`` is partition 0 on brokers 1 and 2 (1
    preferred), partition 1 on 2 and 3, checked as ``TopicCommand.parseReplicaAssignment``."""

    name = "assignment"

    def convert(self, value, param, ctx):
        if isinstance(value, list):
            return value
        out = []
        for i, part in enumerate(value.split(",")):
            try:
                brokers = [int(b.strip()) for b in part.split(":")]
            except ValueError:
                self.fail(f"{part!r} is not a list of broker ids; write 1:2,2:3 (partitions by ',', replicas by ':')",
                          param, ctx)
            repeated = sorted({b for b in brokers if brokers.count(b) > 1})
            if repeated:
                self.fail("Partition replica lists may not contain duplicate entries: "
                          + ",".join(map(str, repeated)), param, ctx)
            if out and len(brokers) != len(out[0]):
                self.fail(f"Partition {i} has different replication factor: {brokers}", param, ctx)
            out.append(brokers)
        return out


REPLICA_ASSIGNMENT = _ReplicaAssignment()


class _Timestamp(click.ParamType):
    """earliest / latest / max-timestamp / earliest-local / latest-tiered (Kafka's -2 / -1 / -3 /
    -4 / -5), ms since the epoch, or ISO-8601 (UTC when no zone is given), as Kafka's 64-bit
    millisecond timestamp."""

    name = "time"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        text = str(value).strip()
        if text in NAMED_TIMES:
            return NAMED_TIMES[text]
        if text.lstrip("-").isdigit():
            ms = int(text)
            if not -5 <= ms <= INT64_MAX:
                self.fail(f"{text} is outside the range of timestamps (ms since the epoch, "
                          f"0 to {INT64_MAX}); use earliest, latest, max-timestamp, earliest-local, "
                          "latest-tiered, ms or ISO-8601", param, ctx)
            return ms
        try:
            moment = dt.datetime.fromisoformat(text)
        except ValueError:
            self.fail(f"{text!r} is not a time; use earliest, latest, max-timestamp, earliest-local, "
                      "latest-tiered, ms since the epoch or ISO-8601 (e.g. 2026-11-01T00:00:00)", param, ctx)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.timezone.utc)
        return int(moment.timestamp() * 1000)


TIMESTAMP = _Timestamp()


class _DateTime(click.ParamType):
    """Kafka's ``--to-datetime``: a date and a time with a 'T' (``2026-11-01T00:00:00[.000][zone]``,
    UTC unless a zone is given); no bare dates, milliseconds or named times, so a typo such as
    ``2024`` cannot reset offsets to the epoch."""

    name = "datetime"

    def convert(self, value, param, ctx):
        text = str(value).strip()
        if "T" not in text:
            self.fail(f"{text!r} is not a date-time (it has no 'T'); use e.g. 2026-11-01T00:00:00 or "
                      "2026-11-01T00:00:00.000+01:00", param, ctx)
        return TIMESTAMP.convert(text, param, ctx)


DATETIME = _DateTime()


class _DataDir(click.ParamType):
    """A directory the broker can create or write: an existing file or an unwritable place is
    refused up front, naming the path."""

    name = "directory"

    def convert(self, value, param, ctx):
        path = os.path.abspath(os.path.expanduser(str(value)))
        if os.path.exists(path):
            if not os.path.isdir(path):
                self.fail(f"{value!r} is a file, not a directory; pass a directory (it is created if missing)",
                          param, ctx)
            if not os.access(path, os.W_OK | os.X_OK):
                self.fail(f"{value!r} is not writable; pass a directory you can write to", param, ctx)
            return str(value)
        parent = path
        while not os.path.exists(parent):
            parent = os.path.dirname(parent)
        if not os.path.isdir(parent):
            self.fail(f"{value!r} cannot be created: {parent!r} is a file; pass a directory path", param, ctx)
        if not os.access(parent, os.W_OK | os.X_OK):
            self.fail(f"{value!r} cannot be created: {parent!r} is not writable; "
                      "pass a directory you can write to", param, ctx)
        return str(value)


DATA_DIR = _DataDir()


class _HostPort(click.ParamType):
    """``host:port`` (an IPv6 host in brackets) with the port in range."""

    name = "host:port"

    def convert(self, value, param, ctx):
        host, sep, port = str(value).strip().rpartition(":")
        if not sep or not port.lstrip("-").isdigit():
            self.fail(f"{value!r} is not host:port (e.g. 127.0.0.1:9092)", param, ctx)
        PORT.convert(port, param, ctx)
        return f"{host}:{int(port)}"


HOST_PORT = _HostPort()


class _Quorum(click.ParamType):
    """``controller.quorum.voters``: ``id@host:port,...`` with distinct ids and ports in range."""

    name = "id@host:port,..."

    def convert(self, value, param, ctx):
        ids = set()
        for part in filter(None, (p.strip() for p in str(value).split(","))):
            node, at, address = part.partition("@")
            if not at or not node.isdigit():
                self.fail(f"entry {part!r} is not id@host:port; use e.g. 1@127.0.0.1:9093,2@127.0.0.1:9095",
                          param, ctx)
            try:
                NODE_ID.convert(node, param, ctx)
                HOST_PORT.convert(address, param, ctx)
            except click.BadParameter as e:
                self.fail(f"entry {part!r}: {e.message}", param, ctx)
            if int(address.rpartition(":")[2]) == 0:
                self.fail(f"entry {part!r} has port 0; voters need fixed ports", param, ctx)
            if int(node) in ids:
                self.fail(f"node id {node} appears twice; each voter needs its own id", param, ctx)
            ids.add(int(node))
        return str(value)


QUORUM = _Quorum()


def check_broker_values(values: dict) -> None:
    """The checks of the options above, on the merged broker values (options, ``--config`` and
    ``--properties`` alike), so a bad value never reaches the server as a traceback."""
    for key, kind in (("log.dirs", DATA_DIR),
                      ("controller.quorum.voters", QUORUM), ("node.id", NODE_ID)):
        value = values.get(key)
        if value is not None and str(value).strip() != "":
            try:
                kind.convert(value, None, None)
            except click.BadParameter as e:
                raise click.BadParameter(e.message, param_hint=f"'{key}'") from None


def check_listener_free(address: str, what: str) -> None:
    """Fail with one line when ``host:port`` (port > 0) cannot be bound, e.g. already in use."""
    host, _, port = address.rpartition(":")
    if int(port) == 0:
        return
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server will: TIME_WAIT is no conflict
        try:
            s.bind((host.strip("[]") or "0.0.0.0", int(port)))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                raise click.ClickException(f"{what} {address} is already in use; stop the process listening "
                                           "there or choose another port (0 picks a free one)") from None
            raise click.ClickException(f"cannot listen on {what} {address}: {e.strerror}; "
                                       "check the host and port") from None
