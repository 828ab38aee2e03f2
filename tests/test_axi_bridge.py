"""The AXI4 master bridge (hw/axi.py) alone, in Amaranth's simulator, against a Python AXI
slave that answers late at random, applies a write only when it answers it (B), and refuses
bursts that cross a 4 KB page: random reads and writes at any word address (most not aligned to
the bus, some across a page) come back as the DRAM channel's contract says: a read sees every
write accepted before it (a write accepted after it may show or not: the contract leaves it
open, and no single-PE kernel writes what it reads)."""

import random

import pytest
from amaranth.sim import Simulator

from hwgen.hw.axi import AxiMaster

WORD_BITS, WORDS, TAG_BITS, ADDR_BITS = 32, 4, 2, 12
PAGE_WORDS = 4096 // (WORD_BITS // 8)


def _ops(rng: random.Random, n: int) -> list:
    """Random reads and writes, clustered on a few addresses (so reads meet writes in flight)
    and near the 4 KB page boundary."""
    hot = [rng.randrange(0, 64), PAGE_WORDS - 2, PAGE_WORDS - 3, rng.randrange(0, 2000)]
    ops = []
    for _ in range(n):
        addr = rng.choice(hot) + rng.randrange(0, 6)
        if rng.random() < 0.5:
            data = [rng.randrange(1 << WORD_BITS) for _ in range(WORDS)]
            mask = rng.randrange(1, 1 << WORDS)
            ops.append(("w", addr, data, mask))
        else:
            ops.append(("r", addr))
    return ops


def _writes(op, addr: int) -> bool:
    """Whether `op` writes word `addr`."""
    return op[0] == "w" and 0 <= addr - op[1] < WORDS and op[3] >> (addr - op[1]) & 1


class Slave:
    """An AXI4 slave of `words` x 32-bit beats over a word memory, with random delays."""

    def __init__(self, rng: random.Random, stall: float):
        self.rng, self.stall = rng, stall
        self.mem = {}
        self.errors = []

    def beat_words(self, beat: int) -> list:
        return [self.mem.get(beat * WORDS + k, 0) for k in range(WORDS)]

    def check_burst(self, addr: int, length: int) -> None:
        first, last = addr // 4096, (addr + (length + 1) * WORDS * 4 - 1) // 4096
        if first != last:
            self.errors.append(f"burst at {addr:#x} of {length + 1} beats crosses a 4 KB page")

    async def reads(self, ctx, axi):
        pending = []
        while True:
            ready = self.rng.random() >= self.stall
            ctx.set(axi.arready, ready)
            if pending and self.rng.random() >= self.stall:
                beat, last = pending[0]
                ctx.set(axi.rvalid, 1)
                ctx.set(axi.rdata, sum(w << (32 * k) for k, w in enumerate(self.beat_words(beat))))
                ctx.set(axi.rlast, last)
            else:
                ctx.set(axi.rvalid, 0)
            _, _, arvalid, araddr, arlen, rvalid, rready = await ctx.tick().sample(
                axi.arvalid, axi.araddr, axi.arlen, axi.rvalid, axi.rready
            )
            if rvalid and rready:
                pending.pop(0)
            if arvalid and ready:
                self.check_burst(araddr, arlen)
                base = araddr // (WORDS * 4)
                pending += [(base + k, k == arlen) for k in range(arlen + 1)]

    async def writes(self, ctx, axi):
        bursts, beats, answers = [], [], []  # AW taken; W beats taken; (due cycle, writes)
        cycle = 0
        while True:
            cycle += 1
            aw_ready, w_ready = self.rng.random() >= self.stall, self.rng.random() >= self.stall
            ctx.set(axi.awready, aw_ready)
            ctx.set(axi.wready, w_ready)
            answer = answers and answers[0][0] <= cycle
            ctx.set(axi.bvalid, bool(answer))
            _, _, awvalid, awaddr, awlen, wvalid, wdata, wstrb, wlast, bready = await ctx.tick().sample(
                axi.awvalid, axi.awaddr, axi.awlen, axi.wvalid, axi.wdata, axi.wstrb, axi.wlast, axi.bready
            )
            if answer and bready:
                for addr, value in answers.pop(0)[1]:  # the write is done (visible) once answered
                    self.mem[addr] = value
            if awvalid and aw_ready:
                self.check_burst(awaddr, awlen)
                bursts.append([awaddr // (WORDS * 4), awlen + 1])
            if wvalid and w_ready:
                beats.append((wdata, wstrb, wlast))
            while bursts and len(beats) >= bursts[0][1]:
                beat, n = bursts.pop(0)
                done = []
                for k in range(n):
                    data, strb, last = beats.pop(0)
                    if last != (k == n - 1):
                        self.errors.append("WLAST does not close the burst")
                    for w in range(WORDS):
                        s = (strb >> (4 * w)) & 0xF
                        if s not in (0, 0xF):
                            self.errors.append("a word is written in part")
                        if s:
                            done.append(((beat + k) * WORDS + w, (data >> (32 * w)) & 0xFFFFFFFF))
                answers.append((cycle + self.rng.randrange(0, 40), done))


@pytest.mark.parametrize("seed,stall", [(1, 0.0), (2, 0.3), (3, 0.6)])
def test_bridge_keeps_the_channel_contract(seed, stall):
    rng = random.Random(seed)
    dut = AxiMaster(ADDR_BITS, WORD_BITS, WORDS, TAG_BITS)
    slave = Slave(random.Random(seed + 100), stall)
    ops = _ops(rng, 400)
    expected, got = [], []
    model = {}

    async def kernel(ctx):
        """Issue the ops in order, one accepted before the next; note what each read must see."""
        mem = dut.mem
        for n, op in enumerate(ops):
            if op[0] == "w":
                _, addr, data, mask = op
                ctx.set(mem.wr.valid, 1)
                ctx.set(mem.wr.addr, addr)
                ctx.set(mem.wr.data, sum(w << (32 * k) for k, w in enumerate(data)))
                ctx.set(mem.wr.mask, mask)
                await ctx.tick().until(mem.wr.ready)
                ctx.set(mem.wr.valid, 0)
                for k in range(WORDS):
                    if mask >> k & 1:
                        model[addr + k] = data[k]
            else:
                ctx.set(mem.rd_req.valid, 1)
                ctx.set(mem.rd_req.addr, op[1])
                ctx.set(mem.rd_req.tag, n % 4)
                await ctx.tick().until(mem.rd_req.ready)
                ctx.set(mem.rd_req.valid, 0)
                expected.append((n, [model.get(op[1] + k, 0) for k in range(WORDS)]))

    async def responses(ctx):
        ctx.set(dut.mem.rd_resp.ready, 1)
        async for _, _, valid, data, tag in ctx.tick().sample(
            dut.mem.rd_resp.valid, dut.mem.rd_resp.data, dut.mem.rd_resp.tag
        ):
            if valid:
                got.append((tag, [(data >> (32 * k)) & 0xFFFFFFFF for k in range(WORDS)]))

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(kernel)
    sim.add_process(responses)

    async def reads(ctx):
        await slave.reads(ctx, dut.axi)

    async def writes(ctx):
        await slave.writes(ctx, dut.axi)

    sim.add_process(reads)
    sim.add_process(writes)

    async def finish(ctx):
        await ctx.tick().repeat(40 * len(ops))
        assert ctx.get(dut.idle), "writes are still unanswered long after the last op"

    sim.add_testbench(finish)
    sim.run()
    assert not slave.errors, slave.errors[:3]
    assert len(got) == len(expected)
    for (n, want), (tag, have) in zip(expected, got):
        assert tag == n % 4
        for k, (w, h) in enumerate(zip(want, have)):
            later = {op[2][ops[n][1] + k - op[1]] for op in ops[n + 1 :] if _writes(op, ops[n][1] + k)}
            assert h == w or h in later, f"op {n}: word {ops[n][1] + k} read {h}, expected {w}"
    assert any(op[0] == "r" and op[1] % WORDS for op in ops)  # unaligned reads were tried
    assert any(op[0] == "r" and op[1] // WORDS == PAGE_WORDS // WORDS - 1 and op[1] % WORDS for op in ops)
