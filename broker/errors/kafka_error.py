"""confluent-kafka's ``KafkaError``: the value object a client hands to the application.

It is what ``Message.error()`` returns, what a delivery callback receives as ``err``, and what
``KafkaException.args[0]`` holds. It is not an exception: ``raise KafkaException(err)`` raises the
typed error (:mod:`broker.errors`) it stands for, and ``err.exception()`` returns that typed error
(Riverlog's richer layer: its class, ``message`` and ``details``).

Codes are confluent-kafka's: Kafka's error codes (``KafkaError.OFFSET_OUT_OF_RANGE == 1``) and
librdkafka's local ones, negative and ``_``-prefixed (``KafkaError._PARTITION_EOF == -191``). A
typed error's own wire ``code`` may differ for client-side errors (``PartitionEOF.code`` is 1006);
its ``kafka_code`` is the confluent one.

    msg = consumer.poll(1.0)
    if msg.error():
        if msg.error().code() == KafkaError._PARTITION_EOF:
            ...
        else:
            raise KafkaException(msg.error())
"""
from __future__ import annotations

from broker.errors.descriptions import DESCRIPTIONS

# librdkafka's local errors (rd_kafka_resp_err_t below -100), by their confluent-kafka names.
LOCAL_CODES = {
    "_BAD_MSG": -199, "_BAD_COMPRESSION": -198, "_DESTROY": -197, "_FAIL": -196, "_TRANSPORT": -195,
    "_CRIT_SYS_RESOURCE": -194, "_RESOLVE": -193, "_MSG_TIMED_OUT": -192, "_PARTITION_EOF": -191,
    "_UNKNOWN_PARTITION": -190, "_FS": -189, "_UNKNOWN_TOPIC": -188, "_ALL_BROKERS_DOWN": -187,
    "_INVALID_ARG": -186, "_TIMED_OUT": -185, "_QUEUE_FULL": -184, "_ISR_INSUFF": -183, "_NODE_UPDATE": -182,
    "_SSL": -181, "_WAIT_COORD": -180, "_UNKNOWN_GROUP": -179, "_IN_PROGRESS": -178, "_PREV_IN_PROGRESS": -177,
    "_EXISTING_SUBSCRIPTION": -176, "_ASSIGN_PARTITIONS": -175, "_REVOKE_PARTITIONS": -174, "_CONFLICT": -173,
    "_STATE": -172, "_UNKNOWN_PROTOCOL": -171, "_NOT_IMPLEMENTED": -170, "_AUTHENTICATION": -169,
    "_NO_OFFSET": -168, "_OUTDATED": -167, "_TIMED_OUT_QUEUE": -166, "_UNSUPPORTED_FEATURE": -165,
    "_WAIT_CACHE": -164, "_INTR": -163, "_KEY_SERIALIZATION": -162, "_VALUE_SERIALIZATION": -161,
    "_KEY_DESERIALIZATION": -160, "_VALUE_DESERIALIZATION": -159, "_PARTIAL": -158, "_READ_ONLY": -157,
    "_NOENT": -156, "_UNDERFLOW": -155, "_INVALID_TYPE": -154, "_RETRY": -153, "_PURGE_QUEUE": -152,
    "_PURGE_INFLIGHT": -151, "_FATAL": -150, "_INCONSISTENT": -149, "_GAPLESS_GUARANTEE": -148,
    "_MAX_POLL_EXCEEDED": -147, "_UNKNOWN_BROKER": -146, "_NOT_CONFIGURED": -145, "_FENCED": -144,
    "_APPLICATION": -143, "_ASSIGNMENT_LOST": -142, "_NOOP": -141, "_AUTO_OFFSET_RESET": -140,
    "_LOG_TRUNCATION": -139, "_INVALID_DIFFERENT_RECORD": -138, "_DESTROY_BROKER": -137,
}

# Kafka's error codes, by librdkafka's names (as confluent-kafka exposes them).
BROKER_CODES = {
    "UNKNOWN": -1, "NO_ERROR": 0, "OFFSET_OUT_OF_RANGE": 1, "INVALID_MSG": 2, "UNKNOWN_TOPIC_OR_PART": 3,
    "INVALID_MSG_SIZE": 4, "LEADER_NOT_AVAILABLE": 5, "NOT_LEADER_FOR_PARTITION": 6, "REQUEST_TIMED_OUT": 7,
    "BROKER_NOT_AVAILABLE": 8, "REPLICA_NOT_AVAILABLE": 9, "MSG_SIZE_TOO_LARGE": 10, "STALE_CTRL_EPOCH": 11,
    "OFFSET_METADATA_TOO_LARGE": 12, "NETWORK_EXCEPTION": 13, "COORDINATOR_LOAD_IN_PROGRESS": 14,
    "COORDINATOR_NOT_AVAILABLE": 15, "NOT_COORDINATOR": 16, "TOPIC_EXCEPTION": 17, "RECORD_LIST_TOO_LARGE": 18,
    "NOT_ENOUGH_REPLICAS": 19, "NOT_ENOUGH_REPLICAS_AFTER_APPEND": 20, "INVALID_REQUIRED_ACKS": 21,
    "ILLEGAL_GENERATION": 22, "INCONSISTENT_GROUP_PROTOCOL": 23, "INVALID_GROUP_ID": 24, "UNKNOWN_MEMBER_ID": 25,
    "INVALID_SESSION_TIMEOUT": 26, "REBALANCE_IN_PROGRESS": 27, "INVALID_COMMIT_OFFSET_SIZE": 28,
    "TOPIC_AUTHORIZATION_FAILED": 29, "GROUP_AUTHORIZATION_FAILED": 30, "CLUSTER_AUTHORIZATION_FAILED": 31,
    "INVALID_TIMESTAMP": 32, "UNSUPPORTED_SASL_MECHANISM": 33, "ILLEGAL_SASL_STATE": 34,
    "UNSUPPORTED_VERSION": 35, "TOPIC_ALREADY_EXISTS": 36, "INVALID_PARTITIONS": 37,
    "INVALID_REPLICATION_FACTOR": 38, "INVALID_REPLICA_ASSIGNMENT": 39, "INVALID_CONFIG": 40,
    "NOT_CONTROLLER": 41, "INVALID_REQUEST": 42, "UNSUPPORTED_FOR_MESSAGE_FORMAT": 43, "POLICY_VIOLATION": 44,
    "OUT_OF_ORDER_SEQUENCE_NUMBER": 45, "DUPLICATE_SEQUENCE_NUMBER": 46, "INVALID_PRODUCER_EPOCH": 47,
    "INVALID_TXN_STATE": 48, "INVALID_PRODUCER_ID_MAPPING": 49, "INVALID_TRANSACTION_TIMEOUT": 50,
    "CONCURRENT_TRANSACTIONS": 51, "TRANSACTION_COORDINATOR_FENCED": 52,
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": 53, "SECURITY_DISABLED": 54, "OPERATION_NOT_ATTEMPTED": 55,
    "KAFKA_STORAGE_ERROR": 56, "LOG_DIR_NOT_FOUND": 57, "SASL_AUTHENTICATION_FAILED": 58,
    "UNKNOWN_PRODUCER_ID": 59, "REASSIGNMENT_IN_PROGRESS": 60, "DELEGATION_TOKEN_AUTH_DISABLED": 61,
    "DELEGATION_TOKEN_NOT_FOUND": 62, "DELEGATION_TOKEN_OWNER_MISMATCH": 63,
    "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED": 64, "DELEGATION_TOKEN_AUTHORIZATION_FAILED": 65,
    "DELEGATION_TOKEN_EXPIRED": 66, "INVALID_PRINCIPAL_TYPE": 67, "NON_EMPTY_GROUP": 68,
    "GROUP_ID_NOT_FOUND": 69, "FETCH_SESSION_ID_NOT_FOUND": 70, "INVALID_FETCH_SESSION_EPOCH": 71,
    "LISTENER_NOT_FOUND": 72, "TOPIC_DELETION_DISABLED": 73, "FENCED_LEADER_EPOCH": 74,
    "UNKNOWN_LEADER_EPOCH": 75, "UNSUPPORTED_COMPRESSION_TYPE": 76, "STALE_BROKER_EPOCH": 77,
    "OFFSET_NOT_AVAILABLE": 78, "MEMBER_ID_REQUIRED": 79, "PREFERRED_LEADER_NOT_AVAILABLE": 80,
    "GROUP_MAX_SIZE_REACHED": 81, "FENCED_INSTANCE_ID": 82, "ELIGIBLE_LEADERS_NOT_AVAILABLE": 83,
    "ELECTION_NOT_NEEDED": 84, "NO_REASSIGNMENT_IN_PROGRESS": 85, "GROUP_SUBSCRIBED_TO_TOPIC": 86,
    "INVALID_RECORD": 87, "UNSTABLE_OFFSET_COMMIT": 88, "THROTTLING_QUOTA_EXCEEDED": 89, "PRODUCER_FENCED": 90,
    "RESOURCE_NOT_FOUND": 91, "DUPLICATE_RESOURCE": 92, "UNACCEPTABLE_CREDENTIAL": 93,
    "INCONSISTENT_VOTER_SET": 94, "INVALID_UPDATE_VERSION": 95, "FEATURE_UPDATE_FAILED": 96,
    "PRINCIPAL_DESERIALIZATION_FAILURE": 97, "SNAPSHOT_NOT_FOUND": 98, "POSITION_OUT_OF_RANGE": 99,
    "UNKNOWN_TOPIC_ID": 100, "DUPLICATE_BROKER_REGISTRATION": 101, "BROKER_ID_NOT_REGISTERED": 102,
    "INCONSISTENT_TOPIC_ID": 103, "INCONSISTENT_CLUSTER_ID": 104, "TRANSACTIONAL_ID_NOT_FOUND": 105,
    "FETCH_SESSION_TOPIC_ID_ERROR": 106, "INELIGIBLE_REPLICA": 107, "NEW_LEADER_ELECTED": 108,
    "OFFSET_MOVED_TO_TIERED_STORAGE": 109, "FENCED_MEMBER_EPOCH": 110, "UNRELEASED_INSTANCE_ID": 111,
    "UNSUPPORTED_ASSIGNOR": 112, "STALE_MEMBER_EPOCH": 113, "UNKNOWN_SUBSCRIPTION_ID": 117,
    "TELEMETRY_TOO_LARGE": 118, "TRANSACTION_ABORTABLE": 120, "REBOOTSTRAP_REQUIRED": 129,
}

_NAMES = {code: name for name, code in {**BROKER_CODES, **LOCAL_CODES}.items()}


class KafkaError:
    """An error as confluent-kafka reports it: ``code()``, ``name()``, ``str()``, ``retriable()``,
    ``fatal()``, ``txn_requires_abort()``; equal to another KafkaError or an int with its code.

        KafkaError(KafkaError._PARTITION_EOF) == KafkaError._PARTITION_EOF   # True
        KafkaError(KafkaError.INVALID_CONFIG, "bad acks").exception()         # InvalidConfigError('bad acks')
    """

    __slots__ = ("_code", "_reason", "_fatal", "_retriable", "_txn_requires_abort", "_exception")

    def __init__(self, error: int, reason: str | None = None, fatal: bool = False, retriable: bool = False,
                 txn_requires_abort: bool = False):
        self._code = int(error)
        self._reason = reason
        self._fatal = bool(fatal)
        self._retriable = bool(retriable)
        self._txn_requires_abort = bool(txn_requires_abort)
        self._exception = None

    @classmethod
    def _of(cls, exception, code: int | None = None) -> "KafkaError":
        """The value object standing for a typed error (``code`` overrides its ``kafka_code``)."""
        from broker import errors
        err = cls.__new__(cls)
        # Instance attributes (RiverlogError.reported_as) override the class's.
        err._code = exception.kafka_code if code is None else code
        err._reason = exception.message if hasattr(exception, "message") else None
        err._retriable = bool(exception.retriable)
        fatal = exception.__dict__.get("fatal")
        err._fatal = bool(fatal) if fatal is not None else (
            isinstance(exception, errors.ApplicationRecoverableError)
            and not isinstance(exception, errors.UnknownMemberIdError))
        err._txn_requires_abort = bool(getattr(exception, "txn_requires_abort", False))
        err._exception = exception
        return err

    @classmethod
    def of(cls, error) -> "KafkaError | None":
        """``error`` as a KafkaError: a typed error is wrapped, a KafkaError or None is returned as is."""
        if error is None or isinstance(error, KafkaError):
            return error
        return cls._of(error)

    def code(self) -> int:
        return self._code

    def name(self) -> str:
        if self._code in _NAMES:
            return _NAMES[self._code]
        return self._exception.name if self._exception is not None else f"ERR_{self._code}"

    def str(self) -> str:
        """The human-readable description: the reason given, else librdkafka's text for the code."""
        if self._reason:
            return self._reason
        name = self.name()
        if name in DESCRIPTIONS:
            return DESCRIPTIONS[name]
        return f"Local: {name[1:].replace('_', ' ').capitalize()}" if name.startswith("_") \
            else f"Broker: {name.replace('_', ' ').capitalize()}"

    def retriable(self) -> bool:
        return self._retriable

    def fatal(self) -> bool:
        return self._fatal

    def txn_requires_abort(self) -> bool:
        return self._txn_requires_abort

    def exception(self):
        """Riverlog's typed error this stands for (its class, ``message`` and ``details``)."""
        if self._exception is None:
            from broker.errors import error_for_kafka_code
            self._exception = error_for_kafka_code(self._code)(self.str())
        return self._exception

    def __eq__(self, other):
        if isinstance(other, KafkaError):
            return self._code == other._code
        if isinstance(other, int):
            return self._code == other
        return NotImplemented

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __lt__(self, other):
        return self._code < (other._code if isinstance(other, KafkaError) else other)

    def __hash__(self):
        return hash(self._code)

    def __str__(self):
        return f'KafkaError{{code={self.name()},val={self._code},str="{self.str()}"}}'

    __repr__ = __str__

    def __reduce__(self):
        if self._exception is not None:
            return _from_exception, (self._exception, self._code)
        return KafkaError, (self._code, self._reason, self._fatal, self._retriable, self._txn_requires_abort)


def _from_exception(exception, code: int) -> KafkaError:
    return KafkaError._of(exception, code)


for _name, _code in {**BROKER_CODES, **LOCAL_CODES}.items():
    setattr(KafkaError, _name, _code)
# librdkafka's newer names for the same codes.
KafkaError.NOT_LEADER_OR_FOLLOWER = 6
KafkaError.GROUP_LOAD_IN_PROGRESS = 14
KafkaError.GROUP_COORDINATOR_NOT_AVAILABLE = 15
KafkaError.NOT_COORDINATOR_FOR_GROUP = 16
del _name, _code
