"""A mesh link (hw/link.py): sender, wire of L registers each way, receive FIFO of D beats with
credits. Checked in Amaranth's simulator cycle by cycle against a plain Python model of the
documented behaviour, under random source gaps and random sink back-pressure: every beat
arrives once, in order, unchanged; the sender stops when its credits run out, so a long stall
drops nothing; with the sink always ready the link moves one beat per cycle when
D >= 2L + 2, else D beats per round trip, with beats and cycles exactly as timing.py's
link formulas say. The Verilog of a whole link lints clean under Verilator."""

import random
from collections import deque

import pytest
from amaranth.sim import Simulator
from hypothesis import given, settings
from hypothesis import strategies as st

from hwgen.hw import device
from hwgen.hw.link import Link, LinkRx, LinkTx
from hwgen.timing import (
    LINK_EXTRA,
    LINK_SKID,
    link_beat_latency,
    link_cycles,
    link_depth,
    link_round_trip,
    link_send_cycle,
)


class Model:
    """The link as its docstrings describe it, one cycle at a time: `outputs(...)` gives
    (i.ready, o.valid, o.payload) in a cycle from the inputs and the state; `step()` is the
    clock edge."""

    def __init__(self, latency: int, depth: int):
        self.L, self.D = latency, depth
        self.skid_cap = min(depth, LINK_SKID)
        self.credits = depth
        self.tx = None  # the sender's register: the beat on link.data, or None
        self.fwd = deque([None] * latency)  # wire registers, oldest first
        self.back = deque([0] * latency)
        self.skid, self.ram = deque(), deque()
        self.read_1 = self.read_2 = None  # beats read from the RAM one / two cycles ago
        self.ram_writes = 0

    def outputs(self, i_valid: bool, o_ready: bool):
        o_valid = bool(self.skid)
        self.take = o_valid and o_ready
        self.arriving = self.fwd[0] if self.L else self.tx
        self.credit_in = self.back[0] if self.L else self.take
        i_ready = self.credits > 0 or bool(self.credit_in)
        self.send = i_valid and i_ready
        return i_ready, o_valid, self.skid[0] if o_valid else None

    def step(self, payload):
        self.credits += bool(self.credit_in) - self.send
        assert 0 <= self.credits <= self.D
        if self.L:
            self.fwd.popleft(), self.back.popleft()
            self.fwd.append(self.tx)
            self.back.append(self.take)
        arriving = self.arriving
        self.tx = payload if self.send else None
        landing = self.read_2
        if self.D <= self.skid_cap:
            bypass, read = True, None
        else:
            bypass = not self.ram and self.read_1 is None and landing is None and len(self.skid) < self.skid_cap
            busy = len(self.skid) + (self.read_1 is not None) + (landing is not None)
            read = self.ram.popleft() if self.ram and busy < self.skid_cap else None
        if self.take:
            self.skid.popleft()
        if landing is not None:
            self.skid.append(landing)
        if arriving is not None:
            (self.skid if bypass else self.ram).append(arriving)
            self.ram_writes += not bypass
        self.read_2, self.read_1 = self.read_1, read
        assert len(self.skid) <= self.skid_cap
        assert len(self.skid) + len(self.ram) + (self.read_1 is not None) + (self.read_2 is not None) <= self.D


def _run(latency, depth, word_bits, words, beats, source, sink, seed=0, limit=None):
    """Stream `beats` random beats through a Link; the source offers a new beat in cycle t only
    if source(t) (and holds it until taken), the sink is ready in cycle t if sink(t). Checks
    the design against Model every cycle. Returns (beats sent, beats received, cycle of each
    send, cycle of each receive, beats written to the receiver's RAM)."""
    dut = Link(word_bits=word_bits, words=words, latency=latency, depth=depth)
    model = Model(latency, dut.depth)
    rng = random.Random(seed)
    width = word_bits * words
    data = [rng.getrandbits(width) for _ in range(beats)]
    limit = limit or 40 * beats + 200
    got, sent_at, got_at = [], [], []

    async def bench(ctx):
        nxt, offering = 0, False
        shown = None  # the payload o shows while valid and not taken
        for t in range(limit):
            if not offering and nxt < beats and source(t):
                offering = True
            ready = bool(sink(t))
            ctx.set(dut.i.valid, offering)
            ctx.set(dut.i.payload.as_value(), data[nxt] if offering else 0)
            ctx.set(dut.o.ready, ready)
            await ctx.delay(1e-9)
            want = model.outputs(offering, ready)
            i_ready, o_valid = ctx.get(dut.i.ready), ctx.get(dut.o.valid)
            o_payload = ctx.get(dut.o.payload.as_value())
            assert (i_ready, o_valid) == want[:2], (t, (i_ready, o_valid), want)
            if o_valid:
                assert o_payload == want[2], t
                assert shown is None or shown == o_payload, t  # held until taken
                shown = o_payload
            else:
                assert shown is None, t
            if o_valid and ready:
                got.append(o_payload)
                got_at.append(t)
                shown = None
            if offering and i_ready:
                sent_at.append(t)
                model.step(data[nxt])
                nxt += 1
                offering = False
            else:
                model.step(None)
            if len(got) == beats:
                break
            await ctx.tick()

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == data[: len(got)]  # once, in order, unchanged
    return data, got, sent_at, got_at, model.ram_writes


def _random(p, seed):
    rng = random.Random(seed)
    return lambda t: rng.random() < p


CASES = [  # latency, depth (None: link_depth), word_bits, words
    (0, None, 32, 1),
    (1, None, 32, 1),
    (2, None, 8, 2),
    (8, None, 32, 4),
    (20, None, 8, 1),
    (1, 2, 32, 2),
    (2, 3, 8, 1),
    (8, 5, 32, 1),
    (8, 18, 8, 4),
    (20, 7, 32, 2),
    (3, 1, 8, 1),
]


@pytest.mark.parametrize("ready", [0.6, 0.3])
@pytest.mark.parametrize("latency,depth,word_bits,words", CASES)
def test_random_gaps_and_backpressure_match_the_model(latency, depth, word_bits, words, ready):
    data, got, _, _, ram_writes = _run(
        latency,
        depth,
        word_bits,
        words,
        150,
        _random(0.7, latency),
        _random(ready, words + 7),
        seed=latency * 31 + words,
    )
    assert got == data
    d = depth or link_depth(latency)
    if ready < 0.5 and d > LINK_SKID and d >= link_round_trip(latency):
        assert ram_writes > 0  # the sender outruns the sink: the FIFO's RAM is in use


@pytest.mark.parametrize("latency,words,word_bits", [(1, 1, 8), (8, 2, 32), (20, 4, 32)])
def test_a_long_stall_drops_nothing(latency, words, word_bits):
    """The sink stalls 300 cycles with a source that always has a beat: the sender sends
    exactly D beats and stops; when the sink is ready again every beat comes out, one per
    cycle while the FIFO holds any."""
    depth = link_depth(latency)
    stall = range(20, 320)
    data, got, sent_at, got_at, _ = _run(
        latency, None, word_bits, words, 3 * depth + 40, lambda t: True, lambda t: t not in stall
    )
    assert got == data
    before = sum(1 for t in got_at if t < stall.start)
    assert sum(1 for t in sent_at if t < stall.stop) == before + depth
    after = [t for t in got_at if t >= stall.stop]
    assert after[:depth] == list(range(stall.stop, stall.stop + depth))  # the full FIFO drains at full rate


RATES = [  # latency, depth, words, word_bits: full rate (D >= 2L + 2) and reduced
    (1, None, 1, 32),
    (2, None, 2, 8),
    (8, None, 1, 32),
    (8, None, 4, 8),
    (20, None, 2, 32),
    (1, 4, 1, 8),
    (8, 18, 1, 32),  # exactly the round trip
    (1, 3, 1, 32),
    (2, 2, 2, 8),
    (8, 9, 1, 32),
    (8, 16, 4, 32),
    (20, 10, 1, 8),
    (20, 41, 2, 8),
]


@pytest.mark.parametrize("latency,depth,words,word_bits", RATES)
def test_throughput_and_latency_are_exact(latency, depth, words, word_bits):
    """Source always valid, sink always ready: beat k enters the sender link_send_cycle(k)
    cycles after the first and leaves link_beat_latency(L) cycles after it entered; the last
    of N beats shows link_cycles(N) cycles after the first entered."""
    d = link_depth(latency) if depth is None else depth
    n = 4 * max(d, link_round_trip(latency)) + 5
    _, got, sent_at, got_at, ram_writes = _run(latency, depth, word_bits, words, n, lambda t: True, lambda t: True)
    assert ram_writes == 0
    t0 = sent_at[0]
    assert [t - t0 for t in sent_at] == [link_send_cycle(k, latency, d) for k in range(n)]
    assert [b - a for a, b in zip(sent_at, got_at)] == [link_beat_latency(latency)] * n
    assert got_at[-1] - t0 == link_cycles(n, latency, d)
    if d >= link_round_trip(latency):
        assert got_at[-1] - t0 == link_beat_latency(latency) + n - 1
    else:  # D beats per round trip
        assert sent_at[d] - sent_at[0] == link_round_trip(latency)


@pytest.mark.parametrize("latency", [1, 8])
def test_source_gaps_with_a_ready_sink_keep_the_beat_latency(latency):
    _, _, sent_at, got_at, _ = _run(latency, None, 32, 1, 120, _random(0.5, 3), lambda t: True)
    assert [b - a for a, b in zip(sent_at, got_at)] == [latency + LINK_EXTRA] * 120


def test_formulas():
    assert [link_round_trip(L) for L in (0, 1, 2, 8, 20)] == [2, 4, 6, 18, 42]
    assert [link_depth(L) for L in (0, 1, 2, 8, 20)] == [2, 4, 8, 32, 64]
    assert link_beat_latency(8) == 10
    assert [link_send_cycle(k, 1, 3) for k in range(7)] == [0, 1, 2, 4, 5, 6, 8]
    assert link_cycles(100, 8, 32) == 10 + 99


def test_verilog_lints_clean(tmp_path):
    from hwgen.verilog import to_verilog, waivers
    from hwgen_sim import runner

    for name, link in (
        ("link_a", Link(32, 1, 8)),
        ("link_b", Link(8, 4, 20, depth=7)),
        ("link_c", Link(16, 2, 1, depth=1)),
    ):
        v = tmp_path / f"{name}.v"
        w = tmp_path / f"{name}.vlt"
        v.write_text(to_verilog(link, name))
        w.write_text(waivers(name))
        warnings = runner.lint(str(v), str(w))
        assert "%Warning" not in warnings and "%Error" not in warnings, warnings


def test_a_deep_fifo_is_block_ram_on_ecp5():
    from hwgen.verilog import to_verilog

    with device.primitives("ecp5"):
        text = to_verilog(Link(32, 1, 100), "link_deep")  # depth 256
    assert text.count("DP16KD ") == 2  # 32 bits: two x18 blocks


@pytest.mark.parametrize("latency,depth,words", [(2, None, 1), (8, 5, 2), (8, None, 4)])
def test_sender_and_receiver_work_over_a_jittery_wire(latency, depth, words):
    """LinkTx and LinkRx over a wire whose delay varies from beat to beat and credit to credit
    (in order, at most one a cycle each way, as a channel model with jitter would be): still
    every beat once, in order, unchanged, under random gaps and back-pressure, and never more
    than D beats sent ahead of the credits that came back."""
    from amaranth.hdl import Module

    d = depth or link_depth(latency)
    tx, rx = LinkTx(32, words, d, latency), LinkRx(32, words, d, latency)
    top = Module()
    top.submodules.tx, top.submodules.rx = tx, rx
    rng = random.Random(latency + words)
    data = [rng.getrandbits(32 * words) for _ in range(200)]
    got, source, sink = [], _random(0.8, 1), _random(0.4, 2)

    async def bench(ctx):
        beats, credits = deque(), deque()  # (arrival cycle, beat) and arrival cycles on the wire
        nxt, offering, sent, returned = 0, False, 0, 0
        for t in range(20000):
            if not offering and nxt < len(data) and source(t):
                offering = True
            ctx.set(tx.i.valid, offering)
            ctx.set(tx.i.payload.as_value(), data[nxt] if offering else 0)
            ready = sink(t)
            ctx.set(rx.o.ready, ready)
            here = bool(beats) and beats[0][0] == t
            ctx.set(rx.link.valid, here)
            ctx.set(rx.link.data.as_value(), beats.popleft()[1] if here else 0)
            back = bool(credits) and credits[0] == t
            if back:
                credits.popleft()
                returned += 1
            ctx.set(tx.link.credit, back)
            await ctx.delay(1e-9)
            if ctx.get(tx.link.valid):
                sent += 1
                assert sent - returned <= d, t
                last = beats[-1][0] if beats else t
                beats.append((max(last + 1, t + latency + rng.randrange(6)), ctx.get(tx.link.data.as_value())))
            if ctx.get(rx.link.credit):
                last = credits[-1] if credits else t
                credits.append(max(last + 1, t + latency + rng.randrange(6)))
            if ctx.get(rx.o.valid) and ready:
                got.append(ctx.get(rx.o.payload.as_value()))
            if offering and ctx.get(tx.i.ready):
                nxt, offering = nxt + 1, False
            if len(got) == len(data):
                break
            await ctx.tick()

    sim = Simulator(top)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    sim.run()
    assert got == data


def _model_run(latency, depth, beats, source, sink):
    """The Model alone (no simulator): cycles of each send and each receive."""
    model = Model(latency, depth)
    sent_at, got_at, nxt, offering, t = [], [], 0, False, 0
    while len(got_at) < beats:
        if not offering and nxt < beats and source(t):
            offering = True
        ready = sink(t)
        i_ready, o_valid, payload = model.outputs(offering, ready)
        if o_valid and ready:
            assert payload == len(got_at)
            got_at.append(t)
        if offering and i_ready:
            sent_at.append(t)
            model.step(nxt)
            nxt, offering = nxt + 1, False
        else:
            model.step(None)
        t += 1
    return sent_at, got_at


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 30), st.integers(1, 80), st.integers(1, 200))
def test_the_formulas_match_the_model(latency, depth, beats):
    """timing.py's link formulas against the cycle model the hardware is checked against, over
    many more latencies and depths than the simulator runs."""
    sent_at, got_at = _model_run(latency, depth, beats, lambda t: True, lambda t: True)
    assert [t - sent_at[0] for t in sent_at] == [link_send_cycle(k, latency, depth) for k in range(beats)]
    assert got_at[-1] - sent_at[0] == link_cycles(beats, latency, depth)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 12), st.integers(1, 40), st.randoms(use_true_random=False))
def test_the_model_never_overflows(latency, depth, rng):
    """Under random gaps and stalls the model's FIFO never holds more than D beats nor its
    output registers more than LINK_SKID (Model.step asserts both), and every beat arrives."""
    sent_at, got_at = _model_run(latency, depth, 150, lambda t: rng.random() < 0.7, lambda t: rng.random() < 0.4)
    assert len(got_at) == 150
