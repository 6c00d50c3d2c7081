"""One Riverlog node: a broker, a controller, or both (KRaft's ``process.roles``).

- The **controller** role runs a :class:`ControllerRuntime`: a Raft voter of the metadata quorum
  and, when elected, the active controller.
- The **broker** role follows the committed metadata log (from its own controller runtime when it
  has one, else by long-polling a controller), registers and heartbeats to the active controller,
  and hosts partitions through the :class:`ReplicaManager`.

Metadata changes requested by clients (create a topic, alter configs, ...) go to the active
controller through a :class:`~broker.server.controller_client.ControllerClient`; this node answers
once its own view of the metadata has caught up with the change, so a client that created a topic
can use it at once.

Threading: ``riverlog-metadata`` applies metadata and drives the replica manager;
``riverlog-lifecycle`` registers and heartbeats. Request threads read ``self.image``, which is
replaced (never mutated) on every change.
"""
from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable

from broker.clock import SYSTEM_CLOCK, Clock
from broker.config import Config, loaded_topic_config, topic_defaults
from broker.errors import (BrokerNotAvailableError, NetworkError, RiverlogError, StaleBrokerEpochError,
                           UnknownTopicOrPartitionError)
from broker.metadata.image import MetadataImage, TopicImage
from broker.partition import Partition
from broker.server.controller_client import ControllerClient
from broker.server.controller_runtime import ControllerRuntime, parse_voters
from broker.server.metadata_loader import MetadataLoader
from broker.server.peers import Peers
from broker.server.producer_ids import ProducerIdManager
from broker.server.replica_fetcher import ReplicaFetcherManager
from broker.server.replica_manager import ReplicaManager
from broker.storage.log_manager import LogManager

log = logging.getLogger(__name__)


class Broker:
    def __init__(self, config: Config, clock: Clock = SYSTEM_CLOCK, host: str = "127.0.0.1", port: int = 0,
                 inter_broker: tuple[str, int] | None = None):
        """``host``/``port``: the advertised client listener; ``inter_broker``: the advertised
        listener other brokers use (registered with the controller, so peers find it)."""
        self.config = config
        self.clock = clock
        self.node_id = config["node.id"]
        self.host, self.port = host, port
        self.inter_broker = inter_broker
        roles = {r.strip() for r in config["process.roles"].split(",")}
        self.is_broker, self.is_controller = "broker" in roles, "controller" in roles
        self.voters = parse_voters(config["controller.quorum.voters"]) or {self.node_id: (host, port)}
        if self.is_controller and self.node_id not in self.voters:
            raise ValueError(f"node {self.node_id} has the controller role but is not in controller.quorum.voters")
        self.topic_defaults = topic_defaults(config)
        self.peers = Peers(self.node_id)
        self.logs = LogManager(config["log.dirs"], clock)
        self.runtime = None
        if self.is_controller:
            self.runtime = ControllerRuntime(config, clock, sorted(self.voters), self._send_raft)
        self.controller = ControllerClient(self.node_id, self.voters, self.runtime, self.peers)
        self.image = MetadataImage()
        # called with the names of topics a new image no longer has (or has under a new id)
        self.topic_deletion_listeners: list[Callable[[set[str]], None]] = []
        self.metadata_changed = threading.Condition()
        self.fetchers = ReplicaFetcherManager(self.node_id, config, self.peers, self._address_of,
                                              lambda: self.broker_epoch)
        self.replicas = ReplicaManager(config, clock, self.logs, self.fetchers, self._alter_isr)
        self.replicas.on_isr_candidate = self._isr_candidate
        publishers = [("the replica manager", self._publish_replicas)] if self.is_broker else []
        self.metadata = MetadataLoader(publishers + [("request handlers", self._publish_image)])
        self.replicas.on_fault = self.metadata.publish_fault
        self.producer_ids = ProducerIdManager(self)
        self.incarnation = uuid.uuid4().hex
        self.broker_epoch: int | None = None
        self.fenced = True
        # False until first unfenced, i.e. caught up with the metadata log: until then clients are sent elsewhere.
        self.serving = False
        self.shutting_down = False
        self._shutdown_done = threading.Event()
        self._stopped = threading.Event()
        self._isr_queue: list = []
        self._isr_cond = threading.Condition()
        self._threads = []

    # ------------------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        if self.runtime is not None:
            self.runtime.start()
        targets = [("metadata", self._run_metadata)]
        if self.is_broker:
            targets += [("lifecycle", self._run_lifecycle), ("isr", self._run_isr_updates)]
        for name, target in targets:
            thread = threading.Thread(target=target, name=f"riverlog-{name}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def _send_raft(self, dst: int, message: dict) -> None:
        host, port = self.voters[dst]
        self.peers.send_raft(f"{host}:{port}", message)

    def _address_of(self, node_id: int) -> str | None:
        """A broker's inter-broker listener (follower fetches, leader-epoch queries, markers)."""
        b = self.image.brokers.get(node_id)
        return None if b is None else b.inter_broker_address

    # ------------------------------------------------------------------------------ metadata
    def _run_metadata(self) -> None:
        """Follow the committed metadata log. Nothing ends this loop but stop: a record or a
        publisher that fails is counted in ``self.metadata`` (see ``metadata_loader``) and logged."""
        while not self._stopped.is_set():
            try:
                applied, entries, snapshot = self._fetch_metadata(self.metadata.offset)
            except RiverlogError as e:
                log.debug("metadata fetch failed: %r", e)
                self._stopped.wait(0.2)
                continue
            except Exception as e:  # noqa: BLE001 - counted; the thread must keep following the log
                self.metadata.load_faults.handle("error fetching metadata", e)
                self._stopped.wait(0.2)
                continue
            self.metadata.load(applied, entries, snapshot)

    def _fetch_metadata(self, offset: int):
        wait = self.config["controller.quorum.fetch.timeout.ms"] / 1000.0
        if self.runtime is not None:
            self.runtime.wait_past(offset, min(wait, 0.5))
            return self.runtime.records_since(offset)
        last: RiverlogError = NetworkError("no controller reachable")
        for node in self.controller._candidates():
            host, port = self.voters[node]
            try:
                reply = self.peers.call(f"{host}:{port}", "fetch_metadata",
                                        {"offset": offset, "max_wait_ms": int(wait * 1000)}, timeout=wait + 5)
                if "term" in reply:
                    self.controller.observe(reply["term"], reply["leader"])
                return reply["applied"], reply["entries"], reply.get("snapshot")
            except RiverlogError as e:
                last = e
        raise last

    def _publish_replicas(self, image: MetadataImage, first: bool) -> None:
        if first:
            self.replicas.remove_stale_dirs(image)
        self.replicas.apply_image(image)

    def _publish_image(self, image: MetadataImage, first: bool) -> None:
        # The published image is never mutated, so request handlers can share it while the
        # metadata thread keeps applying to the loader's working copy.
        with self.metadata_changed:
            before, self.image = self.image, image
            self.metadata_changed.notify_all()
        gone = {name for name, t in before.topics.items()
                if name not in image.topics or image.topics[name].topic_id != t.topic_id}
        for listener in self.topic_deletion_listeners if gone else ():
            listener(gone)

    def metadata_errors(self) -> dict:
        """Kafka's broker metadata metrics: records that failed to replay, and failures applying
        the image (hosting partitions), with the last of each."""
        return {f.name: {"count": f.count, "last": f.last}
                for f in (self.metadata.load_faults, self.metadata.apply_faults)}

    def wait_for_metadata(self, offset: int, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        with self.metadata_changed:
            while self.image.offset < offset:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                self.metadata_changed.wait(remaining)

    # ------------------------------------------------------------------------------ registration
    def _run_lifecycle(self) -> None:
        interval = self.config["broker.heartbeat.interval.ms"] / 1000.0
        while not self._stopped.is_set():
            try:
                if self.broker_epoch is None:
                    reply = self.controller.call("register_broker", {
                        "node_id": self.node_id, "host": self.host, "port": self.port,
                        "incarnation": self.incarnation,
                        **({"inter_broker": list(self.inter_broker)} if self.inter_broker else {})}, timeout=5.0)
                    self.broker_epoch = reply["broker_epoch"]
                    log.info("broker %d registered with epoch %d", self.node_id, self.broker_epoch)
                reply = self.controller.call("heartbeat", {
                    "node_id": self.node_id, "broker_epoch": self.broker_epoch,
                    "metadata_offset": self.image.offset, "want_shut_down": self.shutting_down},
                    timeout=max(interval * 4, 2.0))
                if not reply["fenced"] and not self.serving:
                    # Serve once this node's own image shows it unfenced, so its first Metadata
                    # answer already names itself among the brokers.
                    self.wait_for_metadata(reply.get("offset", -1), timeout=interval * 4)
                self.fenced = reply["fenced"]
                if not self.fenced and not self.serving:
                    log.info("broker %d is unfenced and serving clients", self.node_id)
                self.serving = self.serving or not self.fenced
                if reply["should_shut_down"]:
                    self._shutdown_done.set()
            except StaleBrokerEpochError:
                self.broker_epoch = None
                continue
            except RiverlogError as e:
                log.debug("heartbeat failed: %r", e)
            self._stopped.wait(interval)

    # ------------------------------------------------------------------------------ ISR changes
    def _alter_isr(self, partition: Partition, new_isr: list[int], leader_epoch: int, partition_epoch: int,
                   member_epochs) -> None:
        with self._isr_cond:
            self._isr_queue.append(("send", partition, new_isr, leader_epoch, partition_epoch, member_epochs))
            self._isr_cond.notify()

    def _isr_candidate(self, partition: Partition) -> None:
        with self._isr_cond:
            self._isr_queue.append(("check", partition))
            self._isr_cond.notify()

    def _run_isr_updates(self) -> None:
        """Send ISR changes to the controller one by one, off the request threads. Nothing ends
        this loop but stop: a failing item is logged and the next one still runs (a dead thread
        would freeze every ISR here, and a high watermark waiting for a joining replica with it)."""
        period = min(self.config["replica.lag.time.max.ms"] / 2000.0, 0.5)
        next_check = time.monotonic() + period
        while not self._stopped.is_set():
            with self._isr_cond:
                if not self._isr_queue:
                    self._isr_cond.wait(max(0.0, next_check - time.monotonic()))
                queued, self._isr_queue = self._isr_queue, []
            for item in queued:
                self._isr_step(lambda item=item: self.replicas.check_isr(item[1]) if item[0] == "check"
                               else self._send_isr(*item[1:]))
            if time.monotonic() >= next_check:
                next_check = time.monotonic() + period
                self._isr_step(self.replicas.check_isr)

    @staticmethod
    def _isr_step(step: Callable[[], None]) -> None:
        try:
            step()
        except Exception:  # noqa: BLE001 - logged; the ISR thread must keep running
            log.exception("ISR update failed")

    def _send_isr(self, partition: Partition, new_isr: list[int], leader_epoch: int, partition_epoch: int,
                  member_epochs) -> None:
        body = {"leader_id": self.node_id, "topic_id": partition.topic_id, "partition": partition.index,
                "leader_epoch": leader_epoch, "partition_epoch": partition_epoch, "isr": new_isr,
                "member_epochs": [list(m) for m in member_epochs]}
        try:
            reply = self.controller.call("alter_partition", body, timeout=5.0)
            self.wait_for_metadata(reply.get("offset", -1), timeout=2.0)
            log.info("%s-%d: ISR is now %s", partition.topic, partition.index, new_isr)
        except Exception as e:  # noqa: BLE001 - any failure: not committed as far as we know
            # Refused (or unknown): drop the change in flight. A committed change ends it through
            # metadata instead (make_leader -> set_isr), so the HW keeps waiting for a joining replica.
            # Left in flight, no ISR change would ever be proposed again for this partition.
            if isinstance(e, RiverlogError):
                log.info("%s-%d: ISR change to %s refused: %r", partition.topic, partition.index, new_isr, e)
            else:
                log.error("%s-%d: ISR change to %s failed", partition.topic, partition.index, new_isr, exc_info=e)
            partition.abort_isr_change()

    # ------------------------------------------------------------------------------ requests
    def partition(self, topic: str, index: int) -> Partition:
        return self.replicas.partition(topic, index)

    def topic(self, name: str) -> TopicImage:
        found = self.image.topics.get(name)
        if found is None:
            raise UnknownTopicOrPartitionError(f"topic '{name}' does not exist")
        return found

    def topic_config(self, topic: TopicImage) -> Config:
        return loaded_topic_config(topic.configs, self.topic_defaults)[0]

    @property
    def cluster_id(self) -> str:
        return self.image.broker_configs.get("cluster.id", "")

    def controller_call(self, method: str, body: dict, timeout: float = 30.0) -> dict:
        """An operation on the active controller; returns once this node's metadata shows it."""
        reply = self.controller.call(method, body, timeout)
        self.wait_for_metadata(reply.get("offset", -1))
        return reply

    def create_topic(self, name: str, num_partitions: int, replication_factor: int,
                     configs: dict[str, str], validate_only: bool = False, timeout: float = 30.0,
                     assignment: list[list[int]] | None = None) -> None:
        body = {"name": name, "num_partitions": num_partitions, "replication_factor": replication_factor,
                "configs": configs, "validate_only": validate_only, "assignment": assignment or None}
        deadline = time.monotonic() + timeout
        while True:  # "not yet": brokers of a cluster that just started are still registering
            try:
                self.controller_call("create_topic", body, max(0.1, deadline - time.monotonic()))
                return
            except BrokerNotAvailableError:
                if time.monotonic() + 0.05 >= deadline:
                    raise
                time.sleep(0.05)

    def delete_topic(self, name: str) -> None:
        self.controller_call("delete_topic", {"name": name})

    def alter_topic_config(self, name: str, ops: list, incremental: bool, validate_only: bool) -> None:
        """``ops`` as :func:`~broker.config.altered_configs` takes them, applied by the controller."""
        self.controller_call("alter_topic_configs", {"name": name, "ops": [list(op) for op in ops],
                                                     "incremental": incremental, "validate_only": validate_only})

    def create_partitions(self, name: str, total: int, validate_only: bool = False,
                          assignment: list[list[int]] | None = None) -> None:
        self.controller_call("create_partitions", {"name": name, "total": total, "validate_only": validate_only,
                                                   "assignment": assignment or None})

    def elect_leaders(self, topic: str, partitions: list[int] | None, unclean: bool = False) -> dict:
        return self.controller_call("elect_leaders", {"topic": topic, "partitions": partitions, "unclean": unclean})

    def wait_until_ready(self, timeout: float) -> bool:
        """Until this broker is registered, unfenced and has caught up with the metadata log."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.is_broker or self.serving:
                return True
            time.sleep(0.02)
        return False

    # ------------------------------------------------------------------------------ shutdown
    def controlled_shutdown(self) -> None:
        """Ask the controller to move leadership away, and wait (bounded) until it has."""
        if not self.is_broker or not self.config["controlled.shutdown.enable"] or self.broker_epoch is None:
            return
        self.shutting_down = True
        if not self._shutdown_done.wait(self.config["controlled.shutdown.timeout.ms"] / 1000.0):
            log.warning("controlled shutdown timed out; stopping anyway")

    def flush_due(self) -> None:
        self.replicas.flush_due()

    def apply_retention(self) -> None:
        self.replicas.apply_retention()

    def checkpoint_high_watermarks(self) -> None:
        self.replicas.checkpoint_high_watermarks()

    def expire_producers(self) -> None:
        self.replicas.expire_producers(self.config["producer.id.expiration.ms"])

    def close(self) -> None:
        """Flush and close every log, then mark the shutdown clean."""
        self._stopped.set()
        with self._isr_cond:
            self._isr_cond.notify_all()
        if self.runtime is not None:
            self.runtime.stop()
        self.replicas.close()
        self.peers.close()
        self.logs.mark_clean_shutdown()
