"""The driver's questions to the brokers, and Spark's data-loss policy for what they answer.

:class:`OffsetLookup` finds the query's partitions (``describeTopics``, never creating a topic),
their watermarks (a read_committed query stops at each partition's last stable offset) and the
offsets of timestamps, retried as ``fetchOffset.numRetries`` says, and commits each finished batch's
end to the group ``groupId``. :func:`check_start` and :func:`report_data_loss` are Spark's
``reportDataLoss`` cases: offsets below a partition's log start, a topic that disappeared, a latest
offset below the query's position, an added partition that does not start at 0. Kept apart from
:mod:`spark_source.reader` because none of it runs on executors or touches Arrow.
"""
from __future__ import annotations

import logging
import re
import time

from broker.errors import (InvalidConfigError, OffsetOutOfRangeError, RiverlogError, UnknownMemberIdError,
                           UnknownTopicOrPartitionError)
from spark_source.options import EARLIEST, LATEST, SourceOptions
from spark_source.planning import TP

# The source's warnings stay under the one logger name users already configure for it.
log = logging.getLogger("spark_source.reader")

# The group-commit metadata that marks batch 0's start (Spark does not keep it: see initialOffset),
# followed by ":" and the query's SourceOptions.start_fingerprint().
START_PIN = "riverlog.spark.initialOffset"


class DataLossError(RiverlogError):
    """Offsets the query should have read are gone (``failOnDataLoss=true``)."""
    code, name, retriable, grpc_status = 1101, "DATA_LOSS", False, "DATA_LOSS"


def retrying(call, attempts: int, interval_ms: int, what: str, sleep=time.sleep, reset=None):
    """``call()``, tried up to ``attempts`` times while it fails with a retriable error, waiting
    ``interval_ms`` between tries (Spark's ``fetchOffset.numRetries`` / ``fetchOffset.retryIntervalMs``)
    and then calling ``reset()``: as Spark's ``KafkaOffsetReaderAdmin.withRetries`` resets its admin
    before each retry, the next try asks with new consumers, whose metadata is fetched afresh. A
    client that timed out on a leader that stopped answering (SIGSTOP, a hung machine) would ask
    that leader again, though another was elected meanwhile."""
    for attempt in range(1, attempts + 1):
        try:
            return call()
        except RiverlogError as e:
            if not getattr(e, "retriable", False) or attempt == attempts:
                raise
            log.warning("fetching %s failed (attempt %d of %d, fetchOffset.numRetries): %s; retrying in %d ms",
                        what, attempt, attempts, e, interval_ms)
            sleep(interval_ms / 1000)
            if reset is not None:
                reset()


def settled_latest(fetch, known: dict[TP, int] | None, attempts: int, interval_ms: int,
                   sleep=time.sleep) -> dict[TP, int]:
    """``fetch()``'s latest offsets, asked again (up to ``fetchOffset.numRetries`` times,
    ``fetchOffset.retryIntervalMs`` apart) while one is below the offset the query already has for
    that partition, as Spark's ``fetchLatestOffsets(knownOffsets)`` does: a leader elected a moment
    ago may answer a high watermark behind its predecessor's (KAFKA-7703). Only a lower offset that
    persists reaches the data-loss check, which would fail the query or, with
    ``failOnDataLoss=false``, read its records again."""
    for attempt in range(1, attempts + 1):
        latest = fetch()
        lower = sorted((tp, known[tp], off) for tp, off in latest.items() if known and off < known.get(tp, off))
        if not lower or attempt == attempts:
            return latest
        log.warning("found incorrect offsets in some partitions (partition, previous offset, fetched offset): %s; "
                    "asking again (attempt %d of %d, fetchOffset.numRetries)", lower, attempt, attempts)
        sleep(interval_ms / 1000)
    raise AssertionError("unreachable: the last attempt returns")


class OffsetLookup:
    """The driver's view of the topics: partitions, watermarks, offsets for timestamps. Every
    question to the brokers is retried as ``fetchOffset.numRetries`` and ``fetchOffset.retryIntervalMs`` say."""

    def __init__(self, options: SourceOptions):
        from broker.client import Consumer
        self.options = options
        self._committed: tuple[dict[TP, int], bool] | None = None  # the group's offsets as last committed here
        self._reader = None   # a consumer for timestamps_at(), made when first needed
        self._admin = None    # describe_topics for topics() (never creates one), made when first needed
        # Each question waits as long as one request may (``riverlog.request.timeout.ms``, Kafka's
        # ``request.timeout.ms``); a retry then asks with new clients (see :func:`retrying`).
        self._timeout = int(options.consumer_config.get("request.timeout.ms", 30_000)) / 1000
        try:
            # A lookup never creates a topic: a watermark asked of a topic deleted meanwhile fails
            # rather than recreating it (Spark's driver asks with an Admin client, which cannot create).
            self.consumer = Consumer(self._consumer_config())
        except InvalidConfigError as e:  # a riverlog.* consumer setting: name the option as the user wrote it
            name = f"riverlog.{e.details.get('config', '')}"
            raise InvalidConfigError(f"option '{name}': {e}", config=name) from e

    def _consumer_config(self) -> dict:
        return {**self.options.client_config(), "group.id": self.options.group_id,
                "enable.auto.commit": False, "allow.auto.create.topics": False}

    def close(self) -> None:
        self.consumer.close()
        if self._reader is not None:
            self._reader.close()
        if self._admin is not None:
            self._admin.close()

    def reset(self) -> None:
        """New consumers in place of these (Spark's ``KafkaOffsetReaderAdmin.resetAdmin``): their
        first question fetches the cluster's metadata again. They ask partitions' leaders; the
        admin client, which asks any broker for topics, is kept."""
        from broker.client import Consumer
        old, self.consumer = self.consumer, Consumer(self._consumer_config())
        for client in (old, self._reader):
            if client is not None:
                try:
                    client.close()
                except Exception as e:  # noqa: BLE001 - a client stuck on a dead broker: the new one is in use
                    log.debug("closing a replaced consumer failed: %s", e)
        self._reader = None

    def _retrying(self, call, what: str):
        return retrying(call, self.options.fetch_offset_attempts, self.options.fetch_offset_retry_interval_ms, what,
                        reset=self.reset)

    def partitions(self) -> list[TP]:
        """The query's partitions, as Spark's ``ConsumerStrategy.assignedTopicPartitions`` finds them
        with ``describeTopics`` (which never creates a topic): every ``subscribe`` or ``assign``
        topic must exist; ``subscribePattern`` keeps the matching topics the broker does not mark
        internal."""
        o = self.options
        described = self._retrying(self._described, "topics")
        if o.assign is not None:
            return [(t, p) for t, ps in o.assign.items() for p in ps]
        return sorted((t, p) for t, d in described.items() for p in d)

    def _described(self) -> dict[str, list[int]]:
        """``{topic: partitions}`` of the query's topics; a ``subscribe`` or ``assign`` topic the
        cluster does not have fails (Spark's ``UnknownTopicOrPartitionException``), retried as the
        other questions are in case one is being created. A partition ``assign`` names that its
        topic does not have fails too: Spark drops it silently, and with it the records the query
        was asked to read."""
        from broker.client import AdminClient, TopicCollection
        o = self.options
        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": o.bootstrap_servers})
        if o.subscribe_pattern is not None:
            pattern = re.compile(o.subscribe_pattern)
            names = [t for t in self._admin.list_topics(timeout=30).topics if pattern.search(t)]
        else:
            names = list(o.subscribe or o.assign)
        out, missing = {}, []
        for name, future in self._admin.describe_topics(TopicCollection(names)).items():
            try:
                d = future.result(30)
            except UnknownTopicOrPartitionError:
                missing.append(name)   # a matched topic deleted since it was listed: not matched
                continue
            if not (o.subscribe_pattern is not None and d.is_internal):
                out[name] = sorted(p.id for p in d.partitions)
        option = "subscribe" if o.subscribe else "assign"
        if missing and o.subscribe_pattern is None:
            them = "them" if len(missing) > 1 else "it"
            raise UnknownTopicOrPartitionError(
                f"option '{option}' names {', '.join(repr(t) for t in missing)}, which the cluster does not have: "
                f"create {them} (riverlog topics create) or drop {them} from '{option}'")
        absent = [f"{t}-{p}" for t, ps in (o.assign or {}).items() for p in ps if p not in out[t]]
        if absent:
            raise UnknownTopicOrPartitionError(
                f"option 'assign' names {', '.join(absent)}, which the cluster does not have ("
                + "; ".join(f"topic '{t}' has {len(out[t])} partition(s)" for t in sorted(o.assign))
                + "): drop them from 'assign' or add partitions (riverlog topics alter)")
        return out

    def watermarks(self, tps) -> dict[TP, tuple[int, int]]:
        from broker.client import TopicPartition
        return self._retrying(lambda: {tp: self.consumer.get_watermark_offsets(TopicPartition(*tp), self._timeout)
                                       for tp in tps}, "watermarks")

    def resolve(self, spec, tps: list[TP], what: str) -> dict[TP, int]:
        """``earliest``/``latest``/{tp: offset or -2/-1} as offsets of ``tps``."""
        if spec in ("earliest", "latest"):
            marks = self.watermarks(tps)
            return {tp: marks[tp][0 if spec == "earliest" else 1] for tp in tps}
        given = per_partition(spec, tps, what)
        marks = self.watermarks(tps)
        return {tp: marks[tp][0] if given[tp] == EARLIEST else marks[tp][1] if given[tp] == LATEST else given[tp]
                for tp in tps}

    def starting(self, tps: list[TP]) -> dict[TP, int]:
        """Spark's precedence: startingTimestamp, then startingOffsetsByTimestamp, then startingOffsets.
        A partition with no record that recent fails the query, or starts at its end with
        ``startingOffsetsByTimestampStrategy=latest``. That failure is about the option, not data
        loss (Spark's ``IllegalArgumentException``; ``failOnDataLoss`` has no say): it names the option."""
        o = self.options
        if o.starting_timestamp is not None:
            stamps = {tp: o.starting_timestamp for tp in tps}
        elif o.starting_by_timestamp is not None:
            stamps = per_partition(o.starting_by_timestamp, tps, "startingOffsetsByTimestamp")
        else:
            return self.resolve(o.starting, tps, "startingOffsets")
        found = self.offsets_for_times(stamps)
        if o.timestamp_strategy == "error":
            late = [tp for tp in tps if found[tp] is None]
            if late:
                option = "startingTimestamp" if o.starting_timestamp is not None else "startingOffsetsByTimestamp"
                raise InvalidConfigError(
                    f"option '{option}': no record of " + ", ".join(f"{t}-{p}" for t, p in late) + " has a "
                    f"timestamp at or after {stamps[late[0]]} (startingOffsetsByTimestampStrategy=error; 'latest' "
                    "starts there at the end)", config=option)
        return self._or_latest(found, tps)

    def ending(self, tps: list[TP]) -> dict[TP, int]:
        """Spark's precedence: endingTimestamp, then endingOffsetsByTimestamp, then endingOffsets. A
        partition with no record at or after the timestamp ends at its latest offset (as in Spark)."""
        o = self.options
        if o.ending_timestamp is not None:
            stamps = {tp: o.ending_timestamp for tp in tps}
        elif o.ending_by_timestamp is not None:
            stamps = per_partition(o.ending_by_timestamp, tps, "endingOffsetsByTimestamp")
        else:
            return self.resolve(o.ending, tps, "endingOffsets")
        return self._or_latest(self.offsets_for_times(stamps), tps)

    def offsets_for_times(self, stamps: dict[TP, int]) -> dict[TP, int | None]:
        """The first offset at or after each timestamp; None where no record is that recent."""
        from broker.client import TopicPartition
        asked = [TopicPartition(t, p, ts) for (t, p), ts in sorted(stamps.items())]
        found = self._retrying(lambda: {(r.topic, r.partition): r.offset
                                        for r in self.consumer.offsets_for_times(asked, self._timeout)},
                               "offsets for timestamps")
        return {tp: found[tp] if found.get(tp, -1) >= 0 else None for tp in stamps}

    def timestamps_at(self, offsets: dict[TP, int], latest: dict[TP, int],
                      timeout_s: float = 10.0) -> dict[TP, int | None]:
        """The timestamp of the first record each partition holds at or after its offset and before
        ``latest``; None where there is none (aborted records, transaction markers) or it did not
        arrive within ``timeout_s``. Read by a second consumer, assigned for this question only."""
        from broker.client import Consumer, TopicPartition
        if self._reader is None:
            self._reader = Consumer({**self.options.client_config(), "enable.auto.commit": False,
                                     "allow.auto.create.topics": False,
                                     "max.partition.fetch.bytes": 65_536, "queued.max.messages.kbytes": 1_024})
        c, out = self._reader, {}
        c.assign([TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())])
        try:
            deadline = time.monotonic() + timeout_s
            while len(out) < len(offsets) and time.monotonic() < deadline:
                for m in c.consume(500, 0.05):
                    tp = (m.topic(), m.partition())
                    if m.error() is None and tp in offsets and tp not in out and m.offset() >= offsets[tp]:
                        out[tp] = m.timestamp()[1] if m.offset() < latest[tp] else None
                for pos in c.position([TopicPartition(*tp) for tp in offsets if tp not in out]):
                    if pos.offset >= latest[(pos.topic, pos.partition)]:
                        out[(pos.topic, pos.partition)] = None   # read to the end: nothing visible there
        finally:
            c.unassign()
        return {tp: out.get(tp) for tp in offsets}

    def _or_latest(self, found: dict[TP, int | None], tps: list[TP]) -> dict[TP, int]:
        marks = self.watermarks(tps)
        return {tp: marks[tp][1] if found[tp] is None else found[tp] for tp in tps}

    def commit_group(self, offsets: dict[TP, int], pin: bool = False) -> None:
        """The finished batch's end offsets, committed to ``groupId`` for lag tools; ``pin`` marks
        them as batch 0's start (see ``StreamReader.initialOffset``)."""
        from broker.client import TopicPartition
        if not offsets or self._committed == (offsets, pin):
            return  # Spark's commit() of a batch repeats what the next latestOffset() committed
        mark = self._pin_mark() if pin else None
        try:
            self.consumer.commit(offsets=[TopicPartition(t, p, o, metadata=mark)
                                          for (t, p), o in sorted(offsets.items())], asynchronous=False)
            self._committed = (dict(offsets), pin)
        except UnknownMemberIdError:   # Kafka's answer to a commit from outside a group with members
            log.warning("group '%s' has members: the query's offsets are not committed there",
                        self.options.group_id)
        except RiverlogError as e:
            log.warning("could not commit offsets to group '%s': %s", self.options.group_id, e)


    def _pin_mark(self) -> str:
        return f"{START_PIN}:{self.options.start_fingerprint()}"

    def pinned_start(self, tps: list[TP]) -> dict[TP, int] | None:
        """Batch 0's start as an earlier ``initialOffset`` of a query with the same topics and start
        options pinned it. A pin of other options (another query using the same group), or any
        other commit on one of ``tps``, is not this query's: Spark takes a new checkpoint's start
        from ``startingOffsets`` only, never from ``kafka.group.id``. A partition with no commit at
        all was added after the pin: it is left out, as Spark's checkpointed initial offsets leave
        it out, and the next ``latestOffset`` reads it from its start."""
        from broker.client import TopicPartition
        # Asked again while the coordinator cannot answer (it may be loading its offsets right after
        # the restart that brings this replay), then failing: taken as "no pin", ``latest`` would
        # be resolved anew and what arrived since the pin skipped.
        found = self._retrying(lambda: self.consumer.committed([TopicPartition(t, p) for t, p in tps],
                                                               timeout=self._timeout),
                               f"group '{self.options.group_id}' for batch 0's pinned start")
        mark = self._pin_mark()
        pinned = {(f.topic, f.partition): f.offset for f in found if f.metadata == mark and f.offset >= 0}
        if not pinned or any(f.offset >= 0 and f.metadata != mark for f in found):
            return None
        return pinned


def per_partition(spec: dict, tps: list[TP], option: str) -> dict[TP, int]:
    """A per-partition option (``startingOffsets`` JSON, ``...ByTimestamp``) as ``{tp: value}``. As in
    Spark (``KAFKA_START_OFFSET_DOES_NOT_MATCH_ASSIGNED``) it must name exactly the query's
    partitions: a partition left out or one the query does not read is refused."""
    def names(parts) -> str:
        return ", ".join(f"{t}-{p}" for t, p in sorted(parts))

    given = {(t, p): value for t, parts in spec.items() for p, value in parts.items()}
    missing, unknown = set(tps) - set(given), set(given) - set(tps)
    if missing or unknown:
        wrong = "; ".join(filter(None, [missing and f"leaves out {names(missing)}",
                                        unknown and f"names {names(unknown)}, which the query does not read"]))
        hint = " (-2 earliest, -1 latest)" if option.endswith("Offsets") else ""
        raise InvalidConfigError(f"option '{option}' {wrong}: name every partition the query reads and only "
                                 f"those, {names(tps)}{hint}", config=option)
    return given


def report_data_loss(options: SourceOptions, message: str, error_class: str) -> None:
    """Spark's ``reportDataLoss``: fail the query (``failOnDataLoss=true``) or warn and go on.
    ``error_class`` is the condition Spark's ``KafkaExceptions`` raises (``KAFKA_DATA_LOSS.*``)."""
    if options.fail_on_data_loss:
        raise DataLossError(f"{message}; set failOnDataLoss=false to go on with a warning", error_class=error_class)
    log.warning("%s (failOnDataLoss=false: going on)", message)


def check_batch_range(start: dict[TP, int], end: dict[TP, int]) -> None:
    """A batch read whose resolved start lies after its end in some partition fails, as Spark's
    ``KafkaSourceRDD`` asserts for every range it reads, whatever ``failOnDataLoss`` says: a start
    past the partition's end, ``earliest`` above an explicit end (retention removed the range), or a
    start timestamp's offset above the end's. Read as empty, a wrong offset would go unnoticed."""
    for (topic, partition), until in sorted(end.items()):
        begin = start.get((topic, partition), until)
        if begin > until:
            raise OffsetOutOfRangeError(
                f"Beginning offset {begin} is after the ending offset {until} for topic {topic} partition "
                f"{partition}. You either provided an invalid fromOffset, or the Kafka topic has been damaged "
                "(check startingOffsets and endingOffsets, or their timestamp forms, against the partition's "
                "offsets: riverlog topics describe)", topic=topic, partition=partition)


def check_start(options: SourceOptions, start: dict[TP, int], marks: dict[TP, tuple[int, int]]) -> dict[TP, int]:
    """Offsets below a partition's log start were removed before the query read them."""
    out = dict(start)
    for tp, offset in start.items():
        low = marks[tp][0]
        if offset < low:
            message = (f"offsets [{offset}, {low}) of {tp[0]}-{tp[1]} were removed (retention or DeleteRecords) "
                       f"before the query read them")
            if options.fail_on_data_loss:
                raise DataLossError(message + "; set failOnDataLoss=false to skip them with a warning")
            log.warning("%s; skipping them (failOnDataLoss=false)", message)
            out[tp] = low
    return out
