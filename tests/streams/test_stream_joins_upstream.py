"""Stream–stream joins against the data scenarios of Kafka Streams' own tests
(KStreamKStreamJoinTest, KStreamKStreamLeftJoinTest, KStreamKStreamOuterJoinTest,
KStreamKStreamSelfJoinTest, StreamStreamJoinIntegrationTest):
inputs with timestamps, and the results each step emits, in Kafka's order, with their timestamps."""
from __future__ import annotations

import pytest

from streams import Consumed, JoinWindows, Produced, Serdes, StreamsBuilder
from streams.testing import TopologyTestDriver
from tests.streams.join_kit import TwoInputs

pytestmark = pytest.mark.unit
S = Serdes.String()


def plus(left, right) -> str:
    """Kafka's ``MockValueJoiner.TOSTRING_JOINER``."""
    return f"{'null' if left is None else left}+{'null' if right is None else right}"


def joins(kind: str, windows: JoinWindows) -> TwoInputs:
    def build(b, left, right):
        return {"inner": left.join, "left": left.leftJoin, "outer": left.outerJoin}[kind](right, plus, windows)
    return TwoInputs(build)


def run(t: TwoInputs, steps) -> list:
    """Pipe each ``(side, key, value, ts)`` and collect all results since the last call."""
    out = []
    for side, key, value, ts in steps:
        out += t.step(side, key, value, ts)
    return out


def W(diff, grace=None):
    return JoinWindows.ofTimeDifferenceWithNoGrace(diff) if grace is None else \
        JoinWindows.ofTimeDifferenceAndGrace(diff, grace)


# ---------------------------------------------------------------------- sweeps over keys 0..3
def sweep(t: TwoInputs, side: str, prefix: str, ts: int, keys: str = "0123", stagger: bool = False) -> list:
    """Kafka's loops: ``pipeInput(k, prefix + k, ts)`` for each key (``ts + i`` when staggered)."""
    return run(t, [(side, k, f"{prefix}{k}", ts + (i if stagger else 0)) for i, k in enumerate(keys)])


def R(text: str) -> list:
    """``"0:A0+a0@0 1:A1+a1@0"`` -> ``[("0", "A0+a0", 0), ("1", "A1+a1", 0)]``."""
    out = []
    for item in text.split():
        key, rest = item.split(":", 1)
        value, ts = rest.rsplit("@", 1)
        out.append((key, value, int(ts)))
    return out


@pytest.mark.parametrize("kind, windows", [("inner", W(100)), ("outer", W(100, 24 * 3600 * 1000))])
def test_join_and_outer_join_many_to_many(kind, windows):
    """KStreamKStreamJoinTest.testJoin and testOuterJoin (grace 24 h): every record at 0."""
    t = joins(kind, windows)
    assert sweep(t, "L", "A", 0, "01") == []
    assert sweep(t, "R", "a", 0, "01") == R("0:A0+a0@0 1:A1+a1@0")
    assert sweep(t, "L", "B", 0) == R("0:B0+a0@0 1:B1+a1@0")
    assert sweep(t, "R", "b", 0) == R("0:A0+b0@0 0:B0+b0@0 1:A1+b1@0 1:B1+b1@0 2:B2+b2@0 3:B3+b3@0")
    assert sweep(t, "L", "C", 0) == R("0:C0+a0@0 0:C0+b0@0 1:C1+a1@0 1:C1+b1@0 2:C2+b2@0 3:C3+b3@0")
    assert sweep(t, "R", "c", 0, "01") == R("0:A0+c0@0 0:B0+c0@0 0:C0+c0@0 1:A1+c1@0 1:B1+c1@0 1:C1+c1@0")


def test_inner_join_window_bounds_are_inclusive_on_both_ends():
    """KStreamKStreamJoinTest.testWindowing: window 100 around each record, both bounds included."""
    t = joins("inner", W(100))
    assert sweep(t, "L", "A", 0, "01") == []
    assert sweep(t, "R", "a", 0) == R("0:A0+a0@0 1:A1+a1@0")
    assert sweep(t, "L", "B", 1000, stagger=True) == []
    expected = {1100: "0123", 1101: "123", 1102: "23", 1103: "3", 1104: ""}
    for (ts, keys), p in zip(expected.items(), "bcdef"):
        assert sweep(t, "R", p, ts) == [(k, f"B{k}+{p}{k}", ts) for k in keys], ts
    expected = {899: "", 900: "0", 901: "01", 902: "012", 903: "0123"}
    for (ts, keys), p in zip(expected.items(), "ghijk"):
        assert sweep(t, "R", p, ts) == [(k, f"B{k}+{p}{k}", 1000 + int(k)) for k in keys], ts
    assert sweep(t, "R", "l", 2000, stagger=True) == []
    expected = {2100: "0123", 2101: "123", 2102: "23", 2103: "3", 2104: ""}
    for (ts, keys), p in zip(expected.items(), "CDEFG"):
        assert sweep(t, "L", p, ts) == [(k, f"{p}{k}+l{k}", ts) for k in keys], ts
    expected = {1899: "", 1900: "0", 1901: "01", 1902: "012", 1903: "0123"}
    for (ts, keys), p in zip(expected.items(), "HIJKL"):
        assert sweep(t, "L", p, ts) == [(k, f"{p}{k}+l{k}", 2000 + int(k)) for k in keys], ts


@pytest.mark.parametrize("windows, start", [(W(0).after(100), 999), (W(0).before(100), 899)], ids=["after", "before"])
def test_inner_join_asymmetric_windows(windows, start):
    """testAsymmetricWindowingAfter / testAsymmetricWindowingBefore: left records at 1000..1003,
    right sweeps from just outside the window to just past it."""
    t = joins("inner", windows)
    assert sweep(t, "L", "A", 1000, stagger=True) == []
    after = windows.afterMs == 100
    lower = {start: "", start + 1: "0", start + 2: "01", start + 3: "012", start + 4: "0123"}
    for (ts, keys), p in zip(lower.items(), "abcde"):
        result_ts = (lambda k: ts) if after else (lambda k: 1000 + int(k))
        assert sweep(t, "R", p, ts) == [(k, f"A{k}+{p}{k}", result_ts(k)) for k in keys], ts
    top = 1100 if after else 1000
    upper = {top: "0123", top + 1: "123", top + 2: "23", top + 3: "3", top + 4: ""}
    for (ts, keys), p in zip(upper.items(), "fghij"):
        result_ts = (lambda k: ts) if after else (lambda k: 1000 + int(k))
        assert sweep(t, "R", p, ts) == [(k, f"A{k}+{p}{k}", result_ts(k)) for k in keys], ts


@pytest.mark.parametrize("kind", ["left", "outer"])
def test_left_and_outer_join_window_bounds(kind):
    """KStreamKStreamLeftJoinTest/OuterJoinTest.testWindowing (testUpperWindowBound and
    testLowerWindowBound): unmatched left records leave once stream time passes ts + 100, a record
    whose window already closed leaves at once, joined or not per key."""
    t = joins(kind, W(100))
    assert sweep(t, "L", "A", 0, "01") == []
    assert sweep(t, "R", "a", 0) == R("0:A0+a0@0 1:A1+a1@0")
    # upper bound; the outer join emits the unmatched right records a2, a3 once 1000 closes them
    assert sweep(t, "R", "b", 1000, stagger=True) == (R("2:null+a2@0 3:null+a3@0") if kind == "outer" else [])
    expected = {1100: "0123", 1101: "123", 1102: "23", 1103: "3", 1104: ""}
    for (ts, keys), p in zip(expected.items(), "BCDEF"):
        assert sweep(t, "L", p, ts) == [(k, f"{p}{k}+b{k}", ts) for k in keys], ts
    assert run(t, [("L", "0", "dummy", 1405)]) == R(
        "0:C0+null@1101 0:D0+null@1102 1:D1+null@1102 0:E0+null@1103 1:E1+null@1103 2:E2+null@1103 "
        "0:F0+null@1104 1:F1+null@1104 2:F2+null@1104 3:F3+null@1104")
    # lower bound: stream time 1405 closed these windows already
    expected = {899: "", 900: "0", 901: "01", 902: "012", 903: "0123"}
    for (ts, keys), p in zip(expected.items(), "GHIJK"):
        assert sweep(t, "L", p, ts) == [(k, f"{p}{k}+b{k}", 1000 + int(k)) if k in keys else (k, f"{p}{k}+null", ts)
                                        for k in "0123"], ts
    assert run(t, [("L", "0", "dummy", 1203)]) == [("0", "dummy+null", 1203)]


# ---------------------------------------------------------------------- left join
def test_left_join_duplicates():
    """KStreamKStreamLeftJoinTest.testLeftJoinDuplicates."""
    t = joins("left", W(100, 10))
    assert run(t, [("L", "0", "A0", 0), ("L", "0", "A0-0", 0), ("R", "1", "a0", 111), ("R", "2", "dummy", 500)]) == \
        [("0", "A0+null", 0), ("0", "A0-0+null", 0)]
    assert run(t, [("L", "2", "A2", 1000), ("L", "2", "A2-0", 1000), ("R", "2", "a2", 1001)]) == \
        [("2", "A2+a2", 1001), ("2", "A2-0+a2", 1001)]
    assert run(t, [("R", "3", "a3", 315)]) == []


@pytest.mark.parametrize("closer", ["L", "R"])
def test_left_expired_non_joined_records_are_emitted_by_either_processor(closer):
    """testLeftExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor / ...ByTheRightProcessor."""
    t = joins("left", W(100, 0))
    assert run(t, [("L", "0", "A0", 1), ("L", "1", "A1", 2), ("L", "0", "A0-0", 3)]) == []
    assert run(t, [("R", "1", "a1", 3)]) == [("1", "A1+a1", 3)]
    assert run(t, [(closer, "2", "dummy", 401)]) == [("0", "A0+null", 1), ("0", "A0-0+null", 3)]
    other = "R" if closer == "L" else "L"
    assert run(t, [(other, "2", "dummy", 402)]) == [("2", "dummy+dummy", 402)]


@pytest.mark.parametrize("closer", ["L", "R"])
def test_right_non_joined_records_are_never_emitted_by_a_left_join(closer):
    """testRightNonJoinedRecordsAreNeverEmittedByTheLeftProcessor / ...ByTheRightProcessor."""
    t = joins("left", W(100, 0))
    assert run(t, [("R", "0", "A0", 1), ("R", "1", "A1", 2), ("R", "0", "A0-0", 3)]) == []
    assert run(t, [("L", "1", "a1", 3)]) == [("1", "a1+A1", 3)]
    assert run(t, [(closer, "2", "dummy", 401)]) == []
    other = "R" if closer == "L" else "L"
    assert run(t, [(other, "2", "dummy", 402)]) == [("2", "dummy+dummy", 402)]


def test_left_joined_records_with_zero_after_are_emitted():
    """testLeftJoinedRecordsWithZeroAfterAreEmitted: a left record emitted unjoined once its
    window closed still joins a later right record its window store keeps."""
    t = joins("left", W(100).after(0))
    keys = ["0", "1", "2", "3"]
    assert run(t, [("L", k, f"A{k}", 1000 + i) for i, k in enumerate(keys)]) == \
        [("0", "A0+null", 1000), ("1", "A1+null", 1001), ("2", "A2+null", 1002)]
    expected = {999: "0123", 1000: "0123", 1001: "123", 1002: "23", 1003: "3", 1100: ""}
    for (ts, joined), letter in zip(expected.items(), "abcdef"):
        assert run(t, [("R", k, f"{letter}{k}", ts) for k in keys]) == \
            [(k, f"A{k}+{letter}{k}", 1000 + int(k)) for k in joined], ts


@pytest.mark.parametrize("kind", ["left", "outer"])
def test_ordering_non_joined_result_comes_before_the_join_that_closed_it(kind):
    """testOrdering (left and outer)."""
    t = joins(kind, W(100))
    assert run(t, [("L", "0", "A0", 0), ("L", "1", "A1", 100)]) == []
    assert run(t, [("R", "1", "a1", 110)]) == [("0", "A0+null", 0), ("1", "A1+a1", 110)]


def test_left_join_grace_period():
    """KStreamKStreamLeftJoinTest.testGracePeriod."""
    t = joins("left", W(100, 10))
    assert run(t, [("L", "0", "A0", 0), ("L", "1", "A1", 0)]) == []
    assert run(t, [("R", k, f"a{k}", 101) for k in "0123"]) == []
    assert run(t, [("R", "0", "dummy", 1201)]) == [("0", "A0+null", 0), ("1", "A1+null", 0)]


def test_left_join_not_emitted_for_asymmetric_window():
    """shouldNotEmitLeftJoinResultForAsymmetricWindow: before(0), so A0 at 0 joins a0 at 100."""
    t = joins("left", W(100).before(0))
    assert run(t, [("L", "0", "A0", 0), ("L", "1", "A1", 1)]) == []
    assert run(t, [("R", "0", "a0", 100)]) == [("0", "A0+a0", 100)]
    assert run(t, [("R", "1", "a1", 102)]) == [("1", "A1+null", 1)]


# ---------------------------------------------------------------------- outer join
def test_outer_join_duplicates():
    """KStreamKStreamOuterJoinTest.testOuterJoinDuplicates: right before left at one timestamp."""
    t = joins("outer", W(100, 10))
    assert run(t, [("L", "0", "A0", 0), ("L", "0", "A0-0", 0), ("R", "1", "11", 0), ("R", "1", "12", 0),
                   ("R", "1", "10", 111), ("R", "3", "100", 211)]) == \
        [("1", "null+11", 0), ("1", "null+12", 0), ("0", "A0+null", 0), ("0", "A0-0+null", 0)]
    assert run(t, [("L", "2", "A2", 200), ("L", "2", "A2-0", 200), ("R", "2", "13", 201), ("R", "2", "14", 201)]) == \
        [("2", "A2+13", 201), ("2", "A2-0+13", 201), ("2", "A2+14", 201), ("2", "A2-0+14", 201)]
    assert run(t, [("R", "3", "100", 1500)]) == [("1", "null+10", 111), ("3", "null+100", 211)]


@pytest.mark.parametrize("closer, grace", [("L", None), ("R", 0)])
def test_right_expired_non_joined_records_are_emitted_by_either_processor(closer, grace):
    """testRightExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor / ...ByTheRightProcessor."""
    t = joins("outer", W(100, grace))
    assert run(t, [("R", "0", "10", 1), ("R", "1", "11", 2), ("R", "0", "12", 3)]) == []
    assert run(t, [("L", "1", "A1", 3)]) == [("1", "A1+11", 3)]
    value = "dummy" if closer == "L" else "100"
    assert run(t, [(closer, "2", value, 401)]) == [("0", "null+10", 1), ("0", "null+12", 3)]
    other, value = ("R", "100") if closer == "L" else ("L", "dummy")
    assert run(t, [(other, "2", value, 402)]) == [("2", "dummy+100", 402)]


def test_outer_join_grace_period():
    """KStreamKStreamOuterJoinTest.testGracePeriod."""
    t = joins("outer", W(100, 10))
    assert run(t, [("L", "0", "A0", 0), ("R", "1", "11", 0)]) == []
    assert run(t, [("L", "1", "A1", 101), ("R", "0", "10", 101)]) == []
    assert run(t, [("R", "0", "100", 112)]) == [("1", "null+11", 0), ("0", "A0+null", 0)]


def test_outer_join_emits_all_closed_results_past_an_open_one_for_asymmetric_windows():
    """testEmitAllNonJoinedResultsForAsymmetricWindow: before 5, after 20."""
    t = joins("outer", W(5).after(20))
    assert run(t, [("L", "0", "A0", 29), ("L", "1", "A1", 30), ("R", "2", "12", 31), ("R", "3", "13", 36)]) == []
    assert run(t, [("R", "4", "14", 37)]) == [("2", "null+12", 31)]
    assert run(t, [("R", "5", "15", 50)]) == [("0", "A0+null", 29), ("3", "null+13", 36), ("4", "null+14", 37)]


def test_outer_join_asymmetric_before_window():
    """testShouldNotEmitLeftJoinResultForAsymmetricBeforeWindow: before(0), after 100."""
    t = joins("outer", W(100).before(0))
    assert run(t, [("L", "0", "A0", 0), ("L", "1", "A1", 1)]) == []
    assert run(t, [("R", "0", "10", 100)]) == [("0", "A0+10", 100)]
    assert run(t, [("R", "1", "11", 102)]) == [("1", "A1+null", 1)]
    assert run(t, [("R", "2", "12", 103)]) == [("1", "null+11", 102)]
    assert run(t, [("L", "2", "A2", 103)]) == [("2", "A2+12", 103)]


def test_outer_join_asymmetric_after_window():
    """testShouldNotEmitLeftJoinResultForAsymmetricAfterWindow: before 100, after(0)."""
    t = joins("outer", W(100).after(0))
    assert run(t, [("L", "0", "A0", 0), ("L", "1", "A1", 1)]) == [("0", "A0+null", 0)]
    assert run(t, [("R", "1", "11", 1)]) == [("1", "A1+11", 1)]
    assert run(t, [("R", "2", "12", 101), ("R", "3", "13", 101)]) == []
    assert run(t, [("L", "2", "A2", 201)]) == [("2", "A2+12", 201)]


def test_non_joined_results_carry_the_headers_of_the_record_that_closed_their_window():
    """testShouldForwardCurrentHeaders (undefined in Kafka, but what it does)."""
    from streams.testing import TestRecord
    t = joins("outer", W(100, 10))
    t.inputs["L"].pipeInput(TestRecord("0", "A0", 0, (("h", b"\x01"),)))
    t.inputs["R"].pipeInput(TestRecord("1", "10", 0, (("h", b"\x02"),)))
    t.inputs["R"].pipeInput(TestRecord("3", "100", 211, (("h", b"\x03"),)))
    out = t.out.readRecordsToList()
    assert [(r.key, r.value, r.timestamp) for r in out] == [("1", "null+10", 0), ("0", "A0+null", 0)]
    assert [tuple(r.headers) for r in out] == [(("h", b"\x03"),)] * 2
    t.inputs["L"].pipeInput(TestRecord("2", "A2", 200, (("h", b"\x04"),)))
    t.inputs["R"].pipeInput(TestRecord("2", "12", 200, (("h", b"\x05"),)))
    out = t.out.readRecordsToList()
    assert [(r.key, r.value, r.timestamp, tuple(r.headers)) for r in out] == [("2", "A2+12", 200, (("h", b"\x05"),))]


# ---------------------------------------------------------------------- self-join
SELF_INPUT = [("A", "1", 0), ("A", "2", 11000), ("B", "1", 12000), ("A", "3", 13000), ("A", "4", 15000),
              ("C", "1", 16000), ("D", "1", 17000), ("A", "5", 30000)]


def _self_join(windows, optimization: str | None):
    b = StreamsBuilder()
    s1 = b.stream("topic1", Consumed.with_(S, S))
    s1.join(s1, lambda v1, v2: v1 + v2, windows).to("out", Produced.with_(S, S))
    config = {"application.id": "self", "topology.optimization": optimization or "none"}
    d = TopologyTestDriver(b.build(), config)
    return d, d.createInputTopic("topic1", S, S), d.createOutputTopic("out", S, S)


@pytest.mark.parametrize("windows, steps", [
    (W(100), [("A", "1", 1), ("B", "1", 2), ("A", "2", 3), ("B", "2", 4), ("B", "3", 5)]),
    (W(11000, 10000), SELF_INPUT),
    (W(10000), [("A", "1", 0), ("A", "2", 9999)] + SELF_INPUT[2:] + [("A", "5", 6000)]),
], ids=["single", "different-windows", "out-of-order"])
def test_self_join_matches_the_inner_join_of_a_stream_with_itself(windows, steps):
    """KStreamKStreamSelfJoinTest: the optimized self-join emits what the inner join does."""
    results = []
    for optimization in (None, "all"):
        d, inp, out = _self_join(windows, optimization)
        for k, v, ts in steps:
            inp.pipeInput(k, v, ts)
        results.append([(r.key, r.value, r.timestamp) for r in out.readRecordsToList()])
    assert results[1] == results[0]
    if windows.beforeMs == 100:
        # each record joins the earlier ones of its key (this side first), then itself and them
        assert results[0] == [("A", "11", 1), ("B", "11", 2), ("A", "21", 3), ("A", "12", 3), ("A", "22", 3),
                              ("B", "21", 4), ("B", "12", 4), ("B", "22", 4), ("B", "31", 5), ("B", "32", 5),
                              ("B", "13", 5), ("B", "23", 5), ("B", "33", 5)]


@pytest.mark.parametrize("optimization", ["none", "all"])
def test_self_join_integration(optimization):
    """StreamStreamJoinIntegrationTest.testSelfJoin: null values never join."""
    b = StreamsBuilder()
    s = b.stream("left", Consumed.with_(S, S))
    s.join(s, lambda a, c: f"{a}-{c}", W(10_000, 24 * 3600 * 1000)).to("out", Produced.with_(S, S))
    d = TopologyTestDriver(b.build(), {"application.id": "self", "topology.optimization": optimization})
    inp, out = d.createInputTopic("left", S, S), d.createOutputTopic("out", S, S)
    got = []
    for ts, value in enumerate([None, "A", "B", None, "C", None, "D"], start=1):
        inp.pipeInput("0", value, ts)
        got.append([(r.value, r.timestamp) for r in out.readRecordsToList()])
    assert got == [[], [("A-A", 2)], [("B-A", 3), ("A-B", 3), ("B-B", 3)], [],
                   [("C-A", 5), ("C-B", 5), ("A-C", 5), ("B-C", 5), ("C-C", 5)], [],
                   [("D-A", 7), ("D-B", 7), ("D-C", 7), ("A-D", 7), ("B-D", 7), ("C-D", 7), ("D-D", 7)]]


# ---------------------------------------------------------------------- StreamStreamJoinIntegrationTest
# inputWithoutOutOfOrderData: one key ("0"), then a null-key record on each side
IN_ORDER = [("L", "0", v, ts) for v, ts in [(None, 1)]] + [
    (side, "0", value, ts) for side, value, ts in [
        ("R", None, 2), ("L", "A", 3), ("R", "a", 4), ("L", "B", 5), ("R", "b", 6), ("L", None, 7),
        ("R", None, 8), ("L", "C", 9), ("R", "c", 10), ("R", None, 11), ("L", None, 12), ("R", None, 13),
        ("R", "d", 14), ("L", "D", 15)]] + [("L", None, "E", 16), ("R", None, "e", 17)]
INNER = {3: "A-a@4", 4: "B-a@5", 5: "A-b@6 B-b@6", 8: "C-a@9 C-b@9", 9: "A-c@10 B-c@10 C-c@10",
         13: "A-d@14 B-d@14 C-d@14", 14: "D-a@15 D-b@15 D-c@15 D-d@15"}


def _integration(build, steps=IN_ORDER) -> dict:
    t = TwoInputs(lambda b, l, r: build(l, r), config={"application.id": "ssj", "default.key.serde": "String",
                                                       "default.value.serde": "String"})
    got = {}
    for i, (side, key, value, ts) in enumerate(steps):
        out = t.step(side, key, value, ts)
        if out:
            got[i] = " ".join(f"{v}@{ts}" if k is not None else f"<null>{v}@{ts}" for k, v, ts in out)
    return got


DASH = lambda a, c: f"{'null' if a is None else a}-{'null' if c is None else c}"
BIG = W(10_000, 24 * 3600 * 1000)


@pytest.mark.parametrize("kind, extra", [("join", {}), ("leftJoin", {15: "<null>E-null@16"}),
                                         ("outerJoin", {15: "<null>E-null@16", 16: "<null>null-e@17"})])
@pytest.mark.parametrize("repartitioned", [False, True], ids=["direct", "repartitioned"])
def test_stream_stream_join_integration(kind, extra, repartitioned):
    """StreamStreamJoinIntegrationTest.testInner/testLeft/testOuter and their repartitioned
    variants (a key-changing ``map``/``flatMap``+``selectKey`` on each side): null keys reach a
    left/outer joiner through the repartition topics too (KIP-962)."""
    def build(left, right):
        if repartitioned:
            left = left.map(lambda k, v: (k, v))
            right = right.flatMap(lambda k, v: [(k, v)]).selectKey(lambda k, v: k)
        return getattr(left, kind)(right, DASH, BIG)
    assert _integration(build) == {**INNER, **extra}


def test_stream_stream_multi_inner_join_integration():
    """StreamStreamJoinIntegrationTest.testMultiInner: a stream joined twice with one right stream."""
    def build(left, right):
        return left.join(right, DASH, BIG).join(right, DASH, BIG)
    expected = {
        3: "A-a-a@4", 4: "B-a-a@5", 5: "A-b-a@6 B-b-a@6 A-a-b@6 B-a-b@6 A-b-b@6 B-b-b@6",
        8: "C-a-a@9 C-a-b@9 C-b-a@9 C-b-b@9",
        9: "A-c-a@10 A-c-b@10 B-c-a@10 B-c-b@10 C-c-a@10 C-c-b@10 A-a-c@10 B-a-c@10 A-b-c@10 B-b-c@10 "
           "C-a-c@10 C-b-c@10 A-c-c@10 B-c-c@10 C-c-c@10",
        13: "A-d-a@14 A-d-b@14 A-d-c@14 B-d-a@14 B-d-b@14 B-d-c@14 C-d-a@14 C-d-b@14 C-d-c@14 A-a-d@14 "
            "B-a-d@14 A-b-d@14 B-b-d@14 C-a-d@14 C-b-d@14 A-c-d@14 B-c-d@14 C-c-d@14 A-d-d@14 B-d-d@14 C-d-d@14",
        14: "D-a-a@15 D-a-b@15 D-a-c@15 D-a-d@15 D-b-a@15 D-b-b@15 D-b-c@15 D-b-d@15 D-c-a@15 D-c-b@15 "
            "D-c-c@15 D-c-d@15 D-d-a@15 D-d-b@15 D-d-c@15 D-d-d@15"}
    assert _integration(build) == expected


# ---------------------------------------------------------------------- skipped records, store logging
def test_skipped_null_records_are_logged_with_their_position(caplog):
    """shouldLogAndMeterOnSkippedRecordsWithNullValue (stream–stream) and
    shouldLogAndMeterWhenSkippingNullLeftKey/Value (stream–table)."""
    import logging
    with caplog.at_level(logging.WARNING):
        joins("inner", W(100)).step("L", "A", None, 0)
        st = TwoInputs(lambda b, s, tb: s.join(tb, plus), "stream", "table")
        st.step("L", None, "A", 0)
        st.step("L", "1", None, 0)
    messages = [r.getMessage() for r in caplog.records]
    assert "Skipping record due to null key or value. topic=[left] partition=[0] offset=[0]" in messages
    assert "Skipping record due to null join key or value. topic=[left] partition=[0] offset=[0]" in messages
    assert "Skipping record due to null join key or value. topic=[left] partition=[0] offset=[1]" in messages


def _joined_stores(kind: str, streamJoined):
    from streams import Consumed as C
    b = StreamsBuilder()
    left, right = b.stream("left", C.with_(S, S)), b.stream("right", C.with_(S, S))
    getattr(left, kind)(right, plus, W(100, 50), streamJoined).to("out", Produced.with_(S, S))
    return {s.name: s for n in b.build().nodes for s in n.stores}


@pytest.mark.parametrize("kind", ["join", "outerJoin"])
def test_stream_joined_with_logging_enabled_configures_every_join_store_changelog(kind):
    """shouldEnableLoggingWithCustomConfigOnStreamJoined: the configs reach the changelogs of the
    join's stores (the shared outer store included, as Kafka's OuterStreamJoinStoreFactory)."""
    from streams import StreamJoined
    stores = _joined_stores(kind, StreamJoined.with_(S, S, S).withStoreName("store")
                            .withLoggingEnabled({"test": "property"}))
    assert stores and all(s.log_config == {"test": "property"} for s in stores.values())
    assert len(stores) == (2 if kind == "join" else 3)
    from streams.internal_topics import changelog_config
    assert all(changelog_config(s, {}, 86_400_000)["test"] == "property" for s in stores.values())


def test_stream_joined_with_logging_disabled_is_refused_as_materialized_is():
    """shouldDisableLoggingOnStreamJoined: Riverlog keeps every store logged (its changelog is what
    a restart from the broker reads), so it refuses, as ``Materialized.withLoggingDisabled``."""
    from streams import StreamJoined
    from streams.errors import TopologyError
    with pytest.raises(TopologyError, match="withLoggingDisabled"):
        StreamJoined.with_(S, S, S).withLoggingDisabled()
    with pytest.raises(TopologyError, match="cleanup.policy"):
        StreamJoined.with_(S, S, S).withLoggingEnabled({"cleanup.policy": "delete"})


@pytest.mark.parametrize("newest, joined", [(19, True), (20, False)])
def test_a_join_store_reads_back_to_stream_time_minus_retention_exclusive(newest, joined):
    """Both Kafka window stores fetch from ``observed stream time - retention + 1`` (retention:
    before + after + grace = 20 here), so A at 0 is gone once its own side has seen 20."""
    t = joins("inner", W(10))
    run(t, [("L", "k", "A", 0), ("L", "x", "X", newest)])
    assert run(t, [("R", "k", "a", 5)]) == ([("k", "A+a", 5)] if joined else [])
