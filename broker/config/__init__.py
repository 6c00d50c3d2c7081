"""Riverlog's configuration under Kafka's names, typed and validated once: the broker's keys.

The machinery (:class:`ConfigKey`, :class:`ConfigDef`, the frozen :class:`Config`, the validators)
is :mod:`broker.config.definition`; the topic's keys are :mod:`broker.config.topic`; the client's
are ``broker.client.config``. Every public name of the first two is imported from here.

    cfg = TOPIC_CONFIG.parse({"segment.bytes": "1048576"}, defaults=topic_defaults(broker_cfg))
    cfg["segment.bytes"]  # 1048576
"""
from __future__ import annotations

from broker.config.definition import (INT_MAX, LONG_MAX, LONG_MIN, SHORT_MAX, Config, ConfigDef,  # noqa: F401
                                      ConfigKey, at_least, between, one_of)
from broker.config.topic import (APPEND, LIST_TOPIC_KEYS, REFUSED_TOPIC_KEYS, SUBTRACT, TOPIC_CONFIG,  # noqa: F401
                                 TOPIC_KEYS, altered_configs, altered_list, loaded_topic_config,
                                 timestamp_bounds)


def _one_log_dir(value: str) -> str | None:
    """Kafka's log.dirs is a comma-separated list (JBOD); here a broker has one data directory, and
    a list taken as one path would put every log in a directory named after the whole list."""
    if "," in value:
        return ("must be one directory: Riverlog keeps all partitions of a broker in one data directory "
                "(no JBOD); give one path, or run one broker per disk")
    return None


BROKER_KEYS = [
    ConfigKey("node.id", int, 0, "this node's id in the cluster", between(0, INT_MAX)),
    ConfigKey("log.dirs", str, "./riverlog-data", "directory holding partition logs and metadata",
              _one_log_dir),
    ConfigKey("listeners", str, "127.0.0.1:9092",
              "NAME://host:port,... the node listens on (port 0 picks one); a bare host:port is the client "
              "listener (PLAINTEXT). The inter-broker listener defaults to a free port on the client's host"),
    ConfigKey("advertised.listeners", str, "", "NAME://host:port,... other parties are told to use "
              "(default: listeners); a bare host:port is the client listener"),
    ConfigKey("inter.broker.listener.name", str, "REPLICATION",
              "the listener other brokers use (replica fetches, leader-epoch queries, transaction markers); "
              "never the client listener"),
    ConfigKey("controller.listener.names", str, "CONTROLLER",
              "the listener of this node's controller.quorum.voters entry (Raft, controller requests, "
              "metadata fetches); never the client listener"),
    ConfigKey("num.partitions", int, 1, "partitions of a topic created without a count", between(1, INT_MAX)),
    ConfigKey("default.replication.factor", int, 1, "replicas of a topic created without a factor",
              between(1, INT_MAX)),
    ConfigKey("auto.create.topics.enable", bool, True,
              "create an unknown topic (num.partitions, default.replication.factor) when a producer or "
              "consumer asks for its metadata, as Kafka; false: such clients get UnknownTopicOrPartition"),
    ConfigKey("num.io.threads", int, 16,
              "threads that do requests' work; a waiting request (long-poll fetch, acks=all produce, idle "
              "stream) holds none", at_least(2)),
    ConfigKey("fetch.max.wait.ms", int, 30_000,
              "longest a fetch long-polls on this broker: a client's larger fetch.max.wait.ms is cut to it",
              at_least(0)),
    ConfigKey("socket.request.max.bytes", int, 104_857_600, "largest request the broker accepts",
              between(1024, INT_MAX)),
    ConfigKey("fetch.max.bytes", int, 57_671_680, "largest fetch response the broker builds", between(1024, INT_MAX)),
    ConfigKey("log.flush.scheduler.interval.ms", int, 1000, "how often flush.ms is checked", at_least(1)),
    ConfigKey("log.retention.check.interval.ms", int, 300_000,
              "how often old segments are removed (retention.ms, retention.bytes, log start offset)",
              at_least(1)),
    ConfigKey("log.retention.hours", int, 168,
              "default retention.ms in hours, used when neither log.retention.ms nor log.retention.minutes is set",
              between(-INT_MAX - 1, INT_MAX)),
    ConfigKey("log.retention.minutes", int, 10_080,
              "default retention.ms in minutes, used when log.retention.ms is not set",
              between(-INT_MAX - 1, INT_MAX)),
    ConfigKey("log.roll.hours", int, 168, "default segment.ms in hours, used when log.roll.ms is not set",
              between(1, INT_MAX)),
    ConfigKey("log.cleaner.enable", bool, True, "run the log cleaner that compacts cleanup.policy=compact topics"),
    ConfigKey("log.cleaner.backoff.ms", int, 15_000, "how long the cleaner sleeps when no log needs cleaning",
              at_least(0)),
    ConfigKey("delete.topic.enable", bool, True, "allow DeleteTopics"),
    # --- cluster (KRaft names)
    ConfigKey("process.roles", str, "broker,controller",
              "broker, controller or both; a single node with both is a whole cluster",
              one_of("broker", "controller", "broker,controller", "controller,broker")),
    ConfigKey("controller.quorum.voters", str, "",
              "id@host:port of every controller (empty: this node alone is the quorum)"),
    ConfigKey("controller.quorum.election.timeout.ms", int, 1000,
              "a follower that hears no leader for this long (randomised up to 2x) starts an election",
              between(10, INT_MAX)),
    ConfigKey("controller.quorum.fetch.timeout.ms", int, 2000, "metadata long-poll wait", between(10, INT_MAX)),
    ConfigKey("broker.heartbeat.interval.ms", int, 250, "how often a broker heartbeats the controller",
              between(10, INT_MAX)),
    ConfigKey("broker.session.timeout.ms", int, 1500,
              "a broker silent this long is fenced and loses leaderships (Kafka: 9000; shorter for fast failover)",
              between(10, INT_MAX)),
    ConfigKey("replica.lag.time.max.ms", int, 10_000,
              "a follower not caught up within this long leaves the ISR (Kafka: 30000)", at_least(10)),
    ConfigKey("replica.fetch.wait.max.ms", int, 200, "follower fetch long-poll wait", between(0, INT_MAX)),
    ConfigKey("replica.fetch.max.bytes", int, 1_048_576, "bytes per partition in a follower fetch",
              between(1024, INT_MAX)),
    ConfigKey("replica.fetch.backoff.ms", int, 100, "pause after a failed follower fetch", between(0, INT_MAX)),
    ConfigKey("replica.high.watermark.checkpoint.interval.ms", int, 5000,
              "how often every hosted partition's high watermark is written to replication-offset-checkpoint "
              "(also at shutdown); a restarted broker's partitions start from it", between(1, INT_MAX)),
    ConfigKey("auto.leader.rebalance.enable", bool, True,
              "move leadership back to the preferred (first) replica when it is in sync"),
    ConfigKey("leader.imbalance.check.interval.seconds", int, 10,
              "how often preferred leaders are restored (Kafka: 300)", at_least(1)),
    ConfigKey("controlled.shutdown.enable", bool, True,
              "move leadership away before a broker stops"),
    ConfigKey("controlled.shutdown.timeout.ms", int, 10_000, "how long a stopping broker waits for it",
              at_least(0)),
    ConfigKey("metadata.max.snapshot.records", int, 10_000,
              "snapshot the metadata image after this many new records", at_least(1)),
    # --- consumer groups
    ConfigKey("offsets.topic.num.partitions", int, 10,
              "partitions of __consumer_offsets, i.e. how many brokers can share group coordination "
              "(Kafka: 50; fewer suits small clusters; fixed once the topic exists)", between(1, 10_000)),
    ConfigKey("offsets.topic.replication.factor", int, 3,
              "replicas of __consumer_offsets, capped by the registered brokers (down ones included) when it is created", between(1, SHORT_MAX)),
    ConfigKey("offsets.topic.segment.bytes", int, 104_857_600, "segment size of __consumer_offsets",
              between(1024, INT_MAX)),
    ConfigKey("offset.metadata.max.bytes", int, 4096,
              "longest metadata a committed offset may carry (characters); a longer one is refused with "
              "OFFSET_METADATA_TOO_LARGE for its partition", between(0, INT_MAX)),
    ConfigKey("offsets.retention.minutes", int, 10_080,
              "how long a committed offset of a topic no member of its group subscribes to is kept after its "
              "commit (a group left with nothing is then deleted)", between(1, INT_MAX)),
    ConfigKey("offsets.retention.check.interval.ms", int, 600_000, "how often expired offsets are looked for",
              between(1, INT_MAX)),
    ConfigKey("offsets.commit.timeout.ms", int, 5000,
              "how long a group write waits for the replicas of __consumer_offsets", between(1, INT_MAX)),
    ConfigKey("group.min.session.timeout.ms", int, 6000, "shortest session.timeout.ms a member may ask for",
              between(1, INT_MAX)),
    ConfigKey("group.max.session.timeout.ms", int, 1_800_000, "longest session.timeout.ms a member may ask for",
              between(1, INT_MAX)),
    ConfigKey("transaction.state.log.num.partitions", int, 10,
              "partitions of __transaction_state (Kafka: 50); fixed once the topic exists", between(1, 10_000)),
    ConfigKey("transaction.state.log.replication.factor", int, 3,
              "replicas of __transaction_state, capped by the registered brokers (down ones included) when it is created", between(1, SHORT_MAX)),
    ConfigKey("transaction.state.log.segment.bytes", int, 104_857_600, "segment size of __transaction_state",
              between(1024, INT_MAX)),
    ConfigKey("transaction.state.log.min.isr", int, 2,
              "min.insync.replicas of __transaction_state (capped by its replication factor): a coordinator "
              "decision is acknowledged once this many replicas hold it", between(1, INT_MAX)),
    ConfigKey("transaction.max.timeout.ms", int, 900_000, "longest transaction.timeout.ms a producer may ask for",
              between(1, INT_MAX)),
    ConfigKey("transactional.id.expiration.ms", int, 604_800_000,
              "a transactional.id with no transaction for this long is forgotten by its coordinator",
              between(1, INT_MAX)),
    ConfigKey("transaction.remove.expired.transaction.cleanup.interval.ms", int, 3_600_000,
              "how often idle transactional ids are looked for", between(1, INT_MAX)),
    ConfigKey("producer.id.expiration.ms", int, 86_400_000,
              "a partition forgets an idempotent producer that wrote nothing for this long (and has no "
              "open transaction)", between(1, INT_MAX)),
    ConfigKey("producer.id.expiration.check.interval.ms", int, 600_000,
              "how often idle producers are looked for", between(1, INT_MAX)),
    ConfigKey("group.consumer.heartbeat.interval.ms", int, 3000,
              "how often members heartbeat when nothing is moving (they are told to)", between(10, INT_MAX)),
    ConfigKey("group.consumer.max.size", int, INT_MAX, "most members a consumer group may have",
              between(1, INT_MAX)),
] + [ConfigKey(k.broker_default, k.type, k.default, k.doc, k.validator)
     for k in TOPIC_KEYS if k.broker_default not in ("min.insync.replicas", "unclean.leader.election.enable")] \
  + [ConfigKey("min.insync.replicas", int, 1, "default replicas that must hold a batch for acks=all",
               between(1, INT_MAX)),
     ConfigKey("unclean.leader.election.enable", bool, False, "default for topics")]
BROKER_CONFIG = ConfigDef("broker", BROKER_KEYS)


# The broker keys behind a topic key's default, most specific first, where Kafka has more than one
# (``KafkaConfig.logRetentionTimeMillis``, ``logRollTimeMillis``); the others have their broker_default.
BROKER_SYNONYMS = {"retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
                   "segment.ms": ("log.roll.ms", "log.roll.hours")}


def topic_defaults(broker_config: Config) -> dict:
    """Topic-level defaults taken from the broker's log.* keys.

    Time keys follow Kafka's ``KafkaConfig.logRetentionTimeMillis`` and ``logRollTimeMillis``:
    ``log.retention.ms`` wins over ``log.retention.minutes``, which wins over ``log.retention.hours``
    (a negative result keeps records forever, -1), and ``log.roll.ms`` over ``log.roll.hours``; only
    keys the broker's configuration sets count, so a Kafka ``server.properties`` with
    ``log.retention.hours=24`` keeps one day, not the 7-day default."""
    defaults = {k.name: broker_config[k.broker_default] for k in TOPIC_KEYS}
    given = broker_config.overrides
    if "log.retention.ms" not in given:
        if "log.retention.minutes" in given:
            defaults["retention.ms"] = max(-1, broker_config["log.retention.minutes"] * 60_000)
        elif "log.retention.hours" in given:
            defaults["retention.ms"] = max(-1, broker_config["log.retention.hours"] * 3_600_000)
    if "log.roll.ms" not in given and "log.roll.hours" in given:
        defaults["segment.ms"] = broker_config["log.roll.hours"] * 3_600_000
    return defaults


def read_properties(path: str) -> dict[str, str]:
    """A ``server.properties`` file as a dict: read as Java's ``Properties.load``
    (:mod:`broker.config.properties`), each value trimmed as Kafka's ``ConfigDef`` trims the
    values it parses."""
    from broker.config.properties import read_properties as read_java
    return {k: v.strip() for k, v in read_java(path).items()}
