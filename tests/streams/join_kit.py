"""Two-input topologies under TopologyTestDriver, for the join tests: pipe (side, key, value, ts)
steps and read what each step produced."""
from __future__ import annotations

from streams import Consumed, Produced, Serdes, StreamsBuilder
from streams.testing import TopologyTestDriver

S = Serdes.String()


def show(left, right) -> str:
    """The wiki's notation: ``X - Y`` with null for a missing side."""
    return f"{'null' if left is None else left} - {'null' if right is None else right}"


class TwoInputs:
    """``build(builder, left_input, right_input) -> KStream`` written to ``out``; inputs are
    topics ``left`` and ``right`` with string keys and values, read as streams or tables."""

    def __init__(self, build, left: str = "stream", right: str = "stream", partitions=None, config=None):
        b = StreamsBuilder()
        read = {"stream": b.stream, "table": b.table, "global": b.globalTable}
        lhs = read[left]("left", Consumed.with_(S, S))
        rhs = read[right]("right", Consumed.with_(S, S))
        build(b, lhs, rhs).to("out", Produced.with_(S, S))
        self.topology = b.build()
        self.driver = TopologyTestDriver(self.topology, config or {"application.id": "joins"}, partitions=partitions)
        self.inputs = {"L": self.driver.createInputTopic("left", S, S),
                       "R": self.driver.createInputTopic("right", S, S)}
        self.out = self.driver.createOutputTopic("out", S, S)

    def step(self, side: str, key, value, ts: int) -> list[tuple]:
        self.inputs[side].pipeInput(key, value, ts)
        return [(r.key, r.value, r.timestamp) for r in self.out.readRecordsToList()]

    def values(self, side: str, key, value, ts: int) -> list:
        return [v for _, v, _ in self.step(side, key, value, ts)]


# The wiki's inputs ("Kafka Streams Join Semantics"): one key, processed in timestamp order.
WIKI = [("L", None, 1), ("R", None, 2), ("L", "A", 3), ("R", "a", 4), ("L", "B", 5), ("R", "b", 6),
        ("L", None, 7), ("R", None, 8), ("L", "C", 9), ("R", "c", 10), ("R", None, 11), ("L", None, 12),
        ("R", None, 13), ("R", "d", 14), ("L", "D", 15)]
