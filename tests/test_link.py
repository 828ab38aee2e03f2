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

from hwgen.hw import device
from hwgen.hw.link import Link
from hwgen.timing import (LINK_EXTRA, LINK_SKID, link_beat_latency, link_cycles, link_depth,
                          link_round_trip, link_send_cycle)


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
        self.read_2, self.read_1 = self.read_1, read
        assert len(self.skid) <= self.skid_cap
        assert len(self.skid) + len(self.ram) + (self.read_1 is not None) + (self.read_2 is not None) <= self.D


def _run(latency, depth, word_bits, words, beats, source, sink, seed=0, limit=None):
    """Stream `beats` random beats through a Link; the source offers a new beat in cycle t only
    if source(t) (and holds it until taken), the sink is ready in cycle t if sink(t). Checks
    the design against Model every cycle. Returns (beats sent, beats received, cycle of each
    send, cycle of each receive)."""
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
    assert got == data[:len(got)]  # once, in order, unchanged
    return data, got, sent_at, got_at


def _random(p, seed):
    rng = random.Random(seed)
    return lambda t: rng.random() < p


CASES = [  # latency, depth (None: link_depth), word_bits, words
    (1, None, 32, 1), (2, None, 8, 2), (8, None, 32, 4), (20, None, 8, 1),
    (1, 2, 32, 2), (2, 3, 8, 1), (8, 5, 32, 1), (8, 18, 8, 4), (20, 7, 32, 2), (3, 1, 8, 1),
]


@pytest.mark.parametrize("latency,depth,word_bits,words", CASES)
def test_random_gaps_and_backpressure_match_the_model(latency, depth, word_bits, words):
    data, got, _, _ = _run(latency, depth, word_bits, words, 150,
                           _random(0.7, latency), _random(0.6, words + 7), seed=latency * 31 + words)
    assert got == data


@pytest.mark.parametrize("latency,words,word_bits", [(1, 1, 8), (8, 2, 32), (20, 4, 32)])
def test_a_long_stall_drops_nothing(latency, words, word_bits):
    """The sink stalls 300 cycles with a source that always has a beat: the sender sends
    exactly D beats and stops; when the sink is ready again every beat comes out, one per
    cycle while the FIFO holds any."""
    depth = link_depth(latency)
    stall = range(20, 320)
    data, got, sent_at, got_at = _run(latency, None, word_bits, words, 3 * depth + 40,
                                      lambda t: True, lambda t: t not in stall)
    assert got == data
    before = sum(1 for t in got_at if t < stall.start)
    assert sum(1 for t in sent_at if t < stall.stop) == before + depth
    after = [t for t in got_at if t >= stall.stop]
    assert after[:depth] == list(range(stall.stop, stall.stop + depth))  # the full FIFO drains at full rate


RATES = [  # latency, depth, words, word_bits: full rate (D >= 2L + 2) and reduced
    (1, None, 1, 32), (2, None, 2, 8), (8, None, 1, 32), (8, None, 4, 8), (20, None, 2, 32),
    (1, 4, 1, 8), (8, 18, 1, 32),  # exactly the round trip
    (1, 3, 1, 32), (2, 2, 2, 8), (8, 9, 1, 32), (8, 16, 4, 32), (20, 10, 1, 8), (20, 41, 2, 8),
]


@pytest.mark.parametrize("latency,depth,words,word_bits", RATES)
def test_throughput_and_latency_are_exact(latency, depth, words, word_bits):
    """Source always valid, sink always ready: beat k enters the sender link_send_cycle(k)
    cycles after the first and leaves link_beat_latency(L) cycles after it entered; the last
    of N beats shows link_cycles(N) cycles after the first entered."""
    d = link_depth(latency) if depth is None else depth
    n = 4 * max(d, link_round_trip(latency)) + 5
    _, got, sent_at, got_at = _run(latency, depth, word_bits, words, n, lambda t: True, lambda t: True)
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
    _, _, sent_at, got_at = _run(latency, None, 32, 1, 120, _random(0.5, 3), lambda t: True)
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

    for name, link in (("link_a", Link(32, 1, 8)), ("link_b", Link(8, 4, 20, depth=7)), ("link_c", Link(16, 2, 1, depth=1))):
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
